# reserve-job never answers DEADLINE_SOON, even inside another job's safety margin.
c1 >> put 0 0 1 1\r\na\r\nput 0 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > reserve-job 1
c1 < RESERVED 1 1
c1 < a
c1 > reserve-job 2
c1 < RESERVED 2 1
c1 < b
