# A half-close in the middle of a body closes the connection: no job, id used up.
c1 >> put 0 0 10 5\r\nab
c1 silent 100
c1 shutdown
c1 eof
c2 > put 0 0 10 1
c2 > a
c2 < INSERTED 2
c2 > stats-job 1
c2 < NOT_FOUND
