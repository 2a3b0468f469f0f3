# put, reserve, delete and peek in one send are answered in order.
c1 >> put 5 0 10 3\r\nabc\r\nreserve\r\ndelete 1\r\npeek 1\r\n
c1 < INSERTED 1
c1 < RESERVED 1 3
c1 < abc
c1 < DELETED
c1 < NOT_FOUND
