# A buried job is not reserved again until kicked.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 0
c1 < BURIED
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
