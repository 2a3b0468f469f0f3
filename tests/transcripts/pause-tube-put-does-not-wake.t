# A put into a paused tube does not wake a reserve waiting on it.
c1 > pause-tube default 60
c1 < PAUSED
c2 > reserve-with-timeout 1
c2 silent 100
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c2 silent 500
c2 < TIMED_OUT
