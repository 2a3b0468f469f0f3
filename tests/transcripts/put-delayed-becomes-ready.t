# A job put with delay 1 is delayed, then ready after about a second.
c1 > put 0 1 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
c1 > reserve-with-timeout 3
c1 silent 600
c1 < RESERVED 1 1
c1 < a
