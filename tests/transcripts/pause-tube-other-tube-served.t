# While one watched tube is paused, jobs of the other watched tubes are handed out.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > use other
c1 < USING other
c1 > put 5 0 10 1
c1 > b
c1 < INSERTED 2
c1 > watch other
c1 < WATCHING 2
c1 > pause-tube default 60
c1 < PAUSED
c1 > reserve-with-timeout 0
c1 < RESERVED 2 1
c1 < b
