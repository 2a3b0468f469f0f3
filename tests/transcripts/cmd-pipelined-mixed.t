# A burst of different commands in one send is answered in order.
c1 >> use t\r\nlist-tube-used\r\nwatch t\r\nput 0 0 10 1\r\nx\r\nreserve\r\ndelete 1\r\nbogus\r\n
c1 < USING t
c1 < USING t
c1 < WATCHING 2
c1 < INSERTED 1
c1 < RESERVED 1 1
c1 < x
c1 < DELETED
c1 < UNKNOWN_COMMAND
