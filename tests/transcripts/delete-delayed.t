# delete removes a delayed job.
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > delete 1
c1 < DELETED
c1 > peek-delayed
c1 < NOT_FOUND
