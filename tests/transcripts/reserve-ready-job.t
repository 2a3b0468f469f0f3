# reserve hands out a ready job at once: RESERVED <id> <bytes>, then the body.
c1 > put 0 0 10 3
c1 > abc
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 3
c1 < abc
