# delete removes a job reserved by this connection.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > delete 1
c1 < DELETED
c1 > peek 1
c1 < NOT_FOUND
