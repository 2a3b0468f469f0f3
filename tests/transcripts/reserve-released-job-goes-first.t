# A released job keeps its id, so it goes before newer jobs of equal priority.
c1 > put 5 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > put 5 0 10 1
c1 > b
c1 < INSERTED 2
c1 > release 1 5 0
c1 < RELEASED
c1 > reserve
c1 < RESERVED 1 1
c1 < a
