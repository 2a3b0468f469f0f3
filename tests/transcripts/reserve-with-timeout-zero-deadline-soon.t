# reserve-with-timeout 0 inside the safety margin answers DEADLINE_SOON at once.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve-with-timeout 0
c1 < DEADLINE_SOON
