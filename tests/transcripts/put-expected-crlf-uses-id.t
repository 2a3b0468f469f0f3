# A put that failed with EXPECTED_CRLF still used up a job id.
c1 >> put 0 0 10 3\r\nabcde
c1 < EXPECTED_CRLF
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 2
