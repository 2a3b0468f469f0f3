# Releasing a job that is not reserved (ready here) is NOT_FOUND; so is an unknown id.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > release 1 0 0
c1 < NOT_FOUND
c1 > release 2 0 0
c1 < NOT_FOUND
