# A zero-length body must be followed by CRLF right away: anything else is EXPECTED_CRLF.
c1 >> put 0 0 10 0\r\nxy
c1 < EXPECTED_CRLF
