# Equal priorities are handed out by id, oldest first.
c1 >> put 7 0 10 1\r\na\r\nput 7 0 10 1\r\nb\r\nput 7 0 10 1\r\nc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 >> reserve\r\nreserve\r\nreserve\r\n
c1 < RESERVED 1 1
c1 < a
c1 < RESERVED 2 1
c1 < b
c1 < RESERVED 3 1
c1 < c
