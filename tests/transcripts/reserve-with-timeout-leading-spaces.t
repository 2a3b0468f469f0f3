# Spaces before the timeout number are skipped.
c1 > reserve-with-timeout    0
c1 < TIMED_OUT
