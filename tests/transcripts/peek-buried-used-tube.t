# peek-buried looks in the used tube only.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 0
c1 < BURIED
c1 > peek-buried
c1 < FOUND 1 1
c1 < a
c2 > use other
c2 < USING other
c2 > peek-buried
c2 < NOT_FOUND
