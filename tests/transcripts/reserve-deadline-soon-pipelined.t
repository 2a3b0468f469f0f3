# Two reserves in one send with a ttr-1 job: the second answers DEADLINE_SOON at once.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 >> reserve\r\nreserve\r\n
c1 < RESERVED 1 1
c1 < a
c1 < DEADLINE_SOON
