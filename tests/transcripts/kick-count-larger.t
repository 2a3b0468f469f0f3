# kick with a bound larger than the jobs there are kicks them all and says how many.
c1 >> put 0 100 10 1\r\na\r\nput 0 100 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > kick 1000
c1 < KICKED 2
c1 > kick 1000
c1 < KICKED 0
