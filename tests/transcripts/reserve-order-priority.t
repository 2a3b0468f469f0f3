# Ready jobs are handed out by priority, lowest number first.
c1 >> put 5 0 10 1\r\na\r\nput 1 0 10 1\r\nb\r\nput 3 0 10 1\r\nc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 > reserve
c1 < RESERVED 2 1
c1 < b
c1 > reserve
c1 < RESERVED 3 1
c1 < c
c1 > reserve
c1 < RESERVED 1 1
c1 < a
