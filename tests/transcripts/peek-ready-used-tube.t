# peek-ready looks in the used tube only, and shows the next job by (pri, id).
c1 >> put 5 0 10 1\r\na\r\nput 1 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > peek-ready
c1 < FOUND 2 1
c1 < b
c1 > use other
c1 < USING other
c1 > peek-ready
c1 < NOT_FOUND
