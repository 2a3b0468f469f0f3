# A blocked reserve is answered when another connection puts a job.
c1 > reserve
c1 silent 100
c2 > put 0 0 10 2
c2 > hi
c2 < INSERTED 1
c1 < RESERVED 1 2
c1 < hi
