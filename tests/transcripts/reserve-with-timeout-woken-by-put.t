# A reserve-with-timeout waiting is answered by a put from another connection.
c1 > reserve-with-timeout 5
c1 silent 100
c2 > put 0 0 10 2
c2 > hi
c2 < INSERTED 1
c1 < RESERVED 1 2
c1 < hi
