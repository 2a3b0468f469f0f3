# quit queued behind a waiting reserve: the reserve is answered, then the
# connection closes (its job goes back to ready), and the put queued after the quit
# is never applied.
c1 >> reserve\r\nquit\r\nput 0 0 60 1\r\na\r\n
c1 silent 100
c2 > put 0 0 60 1
c2 > b
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < b
c1 eof
c2 > peek-ready
c2 < FOUND 1 1
c2 < b
c2 > peek 2
c2 < NOT_FOUND
