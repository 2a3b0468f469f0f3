# A reserve waiting on several tubes is woken by a put into any of them.
c1 > watch second
c1 < WATCHING 2
c1 > reserve
c1 silent 100
c2 > use second
c2 < USING second
c2 > put 0 0 10 1
c2 > x
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < x
