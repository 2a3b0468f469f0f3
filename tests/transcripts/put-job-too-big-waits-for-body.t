%max-job-size 10
# JOB_TOO_BIG comes only after the whole announced body and its CRLF have arrived.
c1 >> put 0 0 10 20\r\n0123456789
c1 silent 150
c1 >> 0123456789
c1 silent 150
c1 >> \r
c1 silent 150
c1 >> \n
c1 < JOB_TOO_BIG
