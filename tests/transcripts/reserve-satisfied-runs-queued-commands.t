# Commands queued behind a waiting reserve are applied as soon as the reserve is
# answered, in order, without more input from the client: the queued put gets the
# next job id.
c1 >> reserve\r\nput 0 0 60 1\r\na\r\nlist-tube-used\r\npeek-ready\r\n
c1 silent 100
c2 > put 0 0 60 1
c2 > b
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < b
c1 < INSERTED 2
c1 < USING default
c1 < FOUND 2 1
c1 < a
