# The two bytes after the body must be exactly CRLF: CR then x is EXPECTED_CRLF.
c1 >> put 0 0 10 2\r\nab\rx
c1 < EXPECTED_CRLF
c1 > list-tube-used
c1 < USING default
