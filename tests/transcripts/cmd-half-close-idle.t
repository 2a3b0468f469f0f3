# A half-close with nothing pending makes the server close the connection.
c1 > list-tube-used
c1 < USING default
c1 shutdown
c1 eof
