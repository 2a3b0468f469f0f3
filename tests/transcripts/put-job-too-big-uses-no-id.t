%max-job-size 10
# A put refused with JOB_TOO_BIG does not use up a job id.
c1 > put 0 0 10 11
c1 > 0123456789a
c1 < JOB_TOO_BIG
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
