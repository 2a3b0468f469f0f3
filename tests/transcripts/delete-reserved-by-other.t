# A job reserved by another connection cannot be deleted: NOT_FOUND.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > delete 1
c2 < NOT_FOUND
c1 > delete 1
c1 < DELETED
