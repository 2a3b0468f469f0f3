# CRLF inside a body is data: only the announced size counts.
c1 > put 0 0 10 8
c1 > ab\r\ncd\r\n
c1 < INSERTED 1
c1 > peek 1
c1 < FOUND 1 8
c1 < ab\r\ncd\r\n
