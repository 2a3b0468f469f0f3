# kick reads its number loosely: junk after it is ignored ("kick 5 junk" kicks 5).
c1 >> put 0 100 10 1\r\na\r\nput 0 100 10 1\r\nb\r\nput 0 100 10 1\r\nc\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 >> put 0 100 10 1\r\nd\r\nput 0 100 10 1\r\ne\r\nput 0 100 10 1\r\nf\r\n
c1 < INSERTED 4
c1 < INSERTED 5
c1 < INSERTED 6
c1 > kick 5 junk
c1 < KICKED 5
c1 > kick 5x
c1 < KICKED 1
