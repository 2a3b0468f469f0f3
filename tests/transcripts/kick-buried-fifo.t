# kick kicks buried jobs in the order they were buried.
c1 >> put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\nput 0 0 10 1\r\nc\r\n
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
c1 >> bury 3 0\r\nbury 1 0\r\nbury 2 0\r\n
c1 < BURIED
c1 < BURIED
c1 < BURIED
c1 > kick 1
c1 < KICKED 1
c1 > peek-ready
c1 < FOUND 3 1
c1 < c
c1 > peek-buried
c1 < FOUND 1 1
c1 < a
