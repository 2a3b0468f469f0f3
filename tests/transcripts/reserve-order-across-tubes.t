# Across watched tubes the job with the lowest (priority, id) goes first.
c1 > use a
c1 < USING a
c1 >> put 9 0 10 2\r\na1\r\nput 2 0 10 2\r\na2\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > use b
c1 < USING b
c1 >> put 2 0 10 2\r\nb3\r\nput 1 0 10 2\r\nb4\r\n
c1 < INSERTED 3
c1 < INSERTED 4
c2 > watch b
c2 < WATCHING 2
c2 > watch a
c2 < WATCHING 3
c2 >> reserve\r\nreserve\r\nreserve\r\nreserve\r\n
c2 < RESERVED 4 2
c2 < b4
c2 < RESERVED 2 2
c2 < a2
c2 < RESERVED 3 2
c2 < b3
c2 < RESERVED 1 2
c2 < a1
