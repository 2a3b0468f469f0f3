# reserve-with-timeout 0 with a ready job reserves it at once.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve-with-timeout 0
c1 < RESERVED 1 1
c1 < a
