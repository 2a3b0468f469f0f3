# More input is queued behind a waiting reserve than the server reads ahead: a put
# of 70,000 bytes (over -z) and a command. Once the reserve is answered, the rest
# is read and answered at once (JOB_TOO_BIG, then USING), with no more input from
# the client.
c1 > watch t
c1 < WATCHING 2
c1 >> reserve\r\nput 0 0 60 70000\r\n{70000*a}\r\nlist-tube-used\r\n
c1 silent 150
c2 > use t
c2 < USING t
c2 > put 0 0 60 1
c2 > x
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < x
c1 < JOB_TOO_BIG
c1 < USING default
