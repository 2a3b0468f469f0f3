# Several puts in one send: one INSERTED each, in order.
c1 >> put 0 0 10 1\r\na\r\nput 0 0 10 2\r\nbb\r\nput 0 0 10 3\r\nccc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
