# Holding a ttr-3 job, reserve-with-timeout 1 times out at 1 s, before the safety
# margin (which would start at 2 s).
c1 > put 0 0 3 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve-with-timeout 1
c1 silent 600
c1 < TIMED_OUT
