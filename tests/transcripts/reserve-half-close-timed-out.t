# A waiting reserve whose client half-closes (shutdown SHUT_WR) gets TIMED_OUT, then
# the server closes the connection.
c1 > reserve
c1 silent 100
c1 shutdown
c1 < TIMED_OUT
c1 eof
