# kick-job of a ready job is NOT_FOUND.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > kick-job 1
c1 < NOT_FOUND
