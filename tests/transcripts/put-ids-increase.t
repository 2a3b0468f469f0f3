# Job ids count up from 1 on a fresh server, across connections and tubes.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c2 > use other
c2 < USING other
c2 > put 0 0 10 1
c2 > b
c2 < INSERTED 2
c1 > put 0 0 10 1
c1 > c
c1 < INSERTED 3
