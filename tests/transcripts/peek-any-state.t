# peek <id> finds a job in any state and any tube: reserved by another connection,
# delayed, buried.
c1 > use t
c1 < USING t
c1 >> put 0 0 10 1\r\na\r\nput 0 100 10 1\r\nb\r\nput 0 0 10 1\r\nc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 > watch t
c1 < WATCHING 2
c1 >> reserve\r\nreserve\r\nbury 3 0\r\n
c1 < RESERVED 1 1
c1 < a
c1 < RESERVED 3 1
c1 < c
c1 < BURIED
c2 >> peek 1\r\npeek 2\r\npeek 3\r\n
c2 < FOUND 1 1
c2 < a
c2 < FOUND 2 1
c2 < b
c2 < FOUND 3 1
c2 < c
