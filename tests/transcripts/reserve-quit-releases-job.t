# quit gives the connection's reserved jobs back: another connection can reserve them.
c1 > put 0 0 60 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > quit
c1 eof
c2 > reserve-with-timeout 0
c2 < RESERVED 1 1
c2 < a
