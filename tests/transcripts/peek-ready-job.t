# peek <id> shows a ready job without reserving it.
c1 > put 0 0 10 3
c1 > abc
c1 < INSERTED 1
c1 > peek 1
c1 < FOUND 1 3
c1 < abc
c1 > reserve-with-timeout 0
c1 < RESERVED 1 3
c1 < abc
