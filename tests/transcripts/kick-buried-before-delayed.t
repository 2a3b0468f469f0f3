# While the used tube has buried jobs, kick kicks only those, never delayed ones.
c1 >> put 0 100 10 1\r\nd\r\nput 0 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > reserve
c1 < RESERVED 2 1
c1 < b
c1 > bury 2 0
c1 < BURIED
c1 > kick 10
c1 < KICKED 1
c1 > peek-delayed
c1 < FOUND 1 1
c1 < d
c1 > kick 10
c1 < KICKED 1
c1 > peek-delayed
c1 < NOT_FOUND
