# After its ttr ran out, the job is no longer reserved by its former holder: touch,
# release and bury are NOT_FOUND; delete works, as for any ready job.
# (The holder's list-tube-used after the ttr lets beanstalkd catch a missed deadline.)
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 silent 1200
c1 > list-tube-used
c1 < USING default
c1 > touch 1
c1 < NOT_FOUND
c1 > release 1 0 0
c1 < NOT_FOUND
c1 > bury 1 0
c1 < NOT_FOUND
c1 > delete 1
c1 < DELETED
