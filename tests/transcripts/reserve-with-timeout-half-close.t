# A waiting reserve-with-timeout gets TIMED_OUT at once when the client half-closes.
c1 > reserve-with-timeout 30
c1 silent 100
c1 shutdown
c1 < TIMED_OUT
c1 eof
