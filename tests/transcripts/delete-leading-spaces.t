# Extra spaces before the id are accepted.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > delete    1
c1 < DELETED
