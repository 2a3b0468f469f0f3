# peek-delayed shows the used tube's delayed job that is ready soonest.
c1 >> put 0 300 10 1\r\na\r\nput 0 200 10 1\r\nb\r\nput 0 400 10 1\r\nc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 > peek-delayed
c1 < FOUND 2 1
c1 < b
