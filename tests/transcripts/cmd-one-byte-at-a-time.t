# A command that trickles in byte by byte is parsed once the CRLF is complete.
c1 >> u
c1 silent 50
c1 >> s
c1 silent 50
c1 >> e
c1 silent 50
c1 >> \s
c1 silent 50
c1 >> q
c1 silent 50
c1 >> \r
c1 silent 50
c1 >> \n
c1 < USING q
