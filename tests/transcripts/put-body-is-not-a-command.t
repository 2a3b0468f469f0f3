# A body that reads like a command is data.
c1 > put 0 0 10 4
c1 > quit
c1 < INSERTED 1
c1 > peek 1
c1 < FOUND 1 4
c1 < quit
