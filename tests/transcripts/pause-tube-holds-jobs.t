# Jobs in a paused tube are not handed out, though peek still sees them.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > pause-tube default 60
c1 < PAUSED
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
c1 > peek-ready
c1 < FOUND 1 1
c1 < a
