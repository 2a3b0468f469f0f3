# A job reserved by another connection cannot be released: NOT_FOUND.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > release 1 0 0
c2 < NOT_FOUND
