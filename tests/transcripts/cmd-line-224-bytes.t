# A command line of 224 bytes, CRLF included, is the longest accepted (here made long
# with leading zeros, which numbers may have).
c1 > put {210*0}1 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve-with-timeout {200*0}\s
c1 < RESERVED 1 1
c1 < a
