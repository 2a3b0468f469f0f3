# Commands pipelined after quit are never answered.
c1 >> quit\r\nlist-tube-used\r\n
c1 eof
