# pause-tube answers PAUSED.
c1 > pause-tube default 10
c1 < PAUSED
