# A connection that closes in the middle of a body used up a job id all the same.
c1 >> put 0 0 10 10\r\nabc
c1 silent 150
c1 close
c2 > put 0 0 10 1
c2 > a
c2 < INSERTED 2
c2 > peek 1
c2 < NOT_FOUND
