# kick-job of an unknown id is NOT_FOUND.
c1 > kick-job 1
c1 < NOT_FOUND
