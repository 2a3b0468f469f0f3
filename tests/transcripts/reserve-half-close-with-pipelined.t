# Half-closing behind a waiting reserve: TIMED_OUT, then the pipelined command's reply,
# then the server closes.
c1 >> reserve\r\nlist-tube-used\r\n
c1 silent 150
c1 shutdown
c1 < TIMED_OUT
c1 < USING default
c1 eof
