# When a pause of 1 second ends, a waiting reserve gets the tube's job.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > pause-tube default 1
c1 < PAUSED
c2 > reserve-with-timeout 3
c2 silent 500
c2 < RESERVED 1 1
c2 < a
