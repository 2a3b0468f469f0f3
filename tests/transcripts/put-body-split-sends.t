# A body that arrives in several pieces is put together; no reply before the last piece.
c1 >> put 0 0 10 11\r\nhel
c1 silent 100
c1 >> lo wo
c1 silent 100
c1 >> rld\r
c1 silent 100
c1 >> \n
c1 < INSERTED 1
c1 > peek 1
c1 < FOUND 1 11
c1 < hello world
