# A kicked job keeps the priority it was buried with.
c1 >> put 500 0 10 1\r\na\r\nput 100 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > reserve-job 1
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 1
c1 < BURIED
c1 > kick 1
c1 < KICKED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
