# A waiting reserve gets a delayed job as soon as its delay ends.
c1 > put 0 1 10 1
c1 > a
c1 < INSERTED 1
c2 > reserve
c2 silent 500
c2 < RESERVED 1 1
c2 < a
