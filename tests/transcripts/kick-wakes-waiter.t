# A kicked job goes to a reserve waiting on another connection.
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c2 > reserve
c2 silent 100
c1 > kick 1
c1 < KICKED 1
c2 < RESERVED 1 1
c2 < a
