# peek of an unknown or deleted id is NOT_FOUND.
c1 > peek 1
c1 < NOT_FOUND
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > delete 1
c1 < DELETED
c1 > peek 1
c1 < NOT_FOUND
