# A released job goes straight to a reserve waiting on another connection.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > reserve
c2 silent 100
c1 > release 1 0 0
c1 < RELEASED
c2 < RESERVED 1 1
c2 < a
