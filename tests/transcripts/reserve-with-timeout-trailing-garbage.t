# Junk after the timeout number is ignored.
c1 > reserve-with-timeout 0x
c1 < TIMED_OUT
c1 > reserve-with-timeout 0 junk
c1 < TIMED_OUT
