# peek-delayed with no delayed job in the used tube is NOT_FOUND.
c1 > peek-delayed
c1 < NOT_FOUND
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > use other
c1 < USING other
c1 > peek-delayed
c1 < NOT_FOUND
