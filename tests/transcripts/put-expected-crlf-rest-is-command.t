# After EXPECTED_CRLF, the bytes beyond the announced size+2 are a new command line.
c1 >> put 0 0 10 1\r\naxxlist-tube-used\r\n
c1 < EXPECTED_CRLF
c1 < USING default
