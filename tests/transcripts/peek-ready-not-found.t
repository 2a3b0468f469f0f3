# peek-ready with no ready job is NOT_FOUND (a delayed job does not count).
c1 > peek-ready
c1 < NOT_FOUND
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > peek-ready
c1 < NOT_FOUND
