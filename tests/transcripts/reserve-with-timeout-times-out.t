# reserve-with-timeout 1 with nothing ready answers TIMED_OUT after about a second.
c1 > reserve-with-timeout 1
c1 silent 700
c1 < TIMED_OUT
