# The put command line itself may arrive in pieces, even split inside its CRLF.
c1 >> pu
c1 silent 100
c1 >> t 0 0 10 2\r
c1 silent 100
c1 >> \nok\r\n
c1 < INSERTED 1
