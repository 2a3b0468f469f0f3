# reserve-job reserves a buried job.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 0
c1 < BURIED
c1 > reserve-job 1
c1 < RESERVED 1 1
c1 < a
c1 > peek-buried
c1 < NOT_FOUND
