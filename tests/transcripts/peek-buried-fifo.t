# peek-buried shows the job buried first, whatever the priorities and ids.
c1 >> put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 >> reserve\r\nreserve\r\n
c1 < RESERVED 1 1
c1 < a
c1 < RESERVED 2 1
c1 < b
c1 > bury 2 9
c1 < BURIED
c1 > bury 1 0
c1 < BURIED
c1 > peek-buried
c1 < FOUND 2 1
c1 < b
