# kick-job of a reserved job is NOT_FOUND, even for its holder.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > kick-job 1
c1 < NOT_FOUND
