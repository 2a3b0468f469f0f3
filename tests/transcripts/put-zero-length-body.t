# A zero-length body is just the CRLF after the command line.
c1 > put 0 0 10 0
c1 >
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 0
c1 <
