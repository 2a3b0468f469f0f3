%max-job-size 10
# A body of exactly the maximum job size is accepted.
c1 > put 0 0 10 10
c1 > 0123456789
c1 < INSERTED 1
