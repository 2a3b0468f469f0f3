# reserve-job reserves a ready job by id, skipping the priority order.
c1 >> put 0 0 10 1\r\na\r\nput 9 0 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > reserve-job 2
c1 < RESERVED 2 1
c1 < b
c1 > reserve
c1 < RESERVED 1 1
c1 < a
