# reserve-job of a reserved job is NOT_FOUND, whoever holds it.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve-job 1
c1 < NOT_FOUND
c2 > reserve-job 1
c2 < NOT_FOUND
