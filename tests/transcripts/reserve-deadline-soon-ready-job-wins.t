# Inside the safety margin, a ready job in a watched tube is reserved, not DEADLINE_SOON.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > put 0 0 10 1
c1 > b
c1 < INSERTED 2
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve
c1 < RESERVED 2 1
c1 < b
