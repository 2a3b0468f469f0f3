# touch of a job not reserved by this connection is NOT_FOUND.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > touch 1
c1 < NOT_FOUND
c1 > touch 2
c1 < NOT_FOUND
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > touch 1
c2 < NOT_FOUND
