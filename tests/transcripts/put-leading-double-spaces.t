# Extra spaces before each number are accepted.
c1 > put  0  0  10  1
c1 > a
c1 < INSERTED 1
