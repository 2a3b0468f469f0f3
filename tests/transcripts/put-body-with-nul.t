# NUL bytes in a body are data.
c1 > put 0 0 10 5
c1 > a\0b\0c
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 5
c1 < a\0b\0c
