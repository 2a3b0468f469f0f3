# reserve-with-timeout answers DEADLINE_SOON too, before its timeout.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve-with-timeout 0
c1 < RESERVED 1 1
c1 < a
c1 > reserve-with-timeout 5
c1 < DEADLINE_SOON
