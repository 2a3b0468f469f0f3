# quit closes the connection without a reply.
c1 > quit
c1 eof
