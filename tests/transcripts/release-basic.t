# release puts a reserved job back to ready.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > release 1 0 0
c1 < RELEASED
c1 > peek-ready
c1 < FOUND 1 1
c1 < a
