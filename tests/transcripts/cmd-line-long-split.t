# A too-long line that arrives in pieces is answered once, when its CRLF comes.
c1 >> {200*x}
c1 silent 100
c1 >> {200*x}
c1 silent 100
c1 >> {200*x}
c1 silent 100
c1 >> \r\n
c1 < BAD_FORMAT
