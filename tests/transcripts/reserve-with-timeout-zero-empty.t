# reserve-with-timeout 0 with nothing ready answers TIMED_OUT at once.
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
