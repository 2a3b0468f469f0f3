# Several reserves in one send get one job each, in order; the last one waits.
c1 >> put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c2 >> reserve\r\nreserve\r\nreserve\r\n
c2 < RESERVED 1 1
c2 < a
c2 < RESERVED 2 1
c2 < b
c2 silent 200
c1 > put 0 0 10 1
c1 > c
c1 < INSERTED 3
c2 < RESERVED 3 1
c2 < c
