# pause-tube with delay 0 ends a pause at once and wakes a waiting reserve.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > pause-tube default 60
c1 < PAUSED
c2 > reserve
c2 silent 200
c1 > pause-tube default 0
c1 < PAUSED
c2 < RESERVED 1 1
c2 < a
