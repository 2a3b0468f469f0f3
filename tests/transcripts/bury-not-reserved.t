# Only a job reserved by this connection can be buried.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > bury 1 0
c1 < NOT_FOUND
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > bury 1 0
c2 < NOT_FOUND
c1 > bury 9 0
c1 < NOT_FOUND
