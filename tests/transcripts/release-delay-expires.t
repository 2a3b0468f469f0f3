# A job released with delay 1 is ready again about a second later.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > release 1 0 1
c1 < RELEASED
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
c1 > reserve-with-timeout 3
c1 silent 500
c1 < RESERVED 1 1
c1 < a
