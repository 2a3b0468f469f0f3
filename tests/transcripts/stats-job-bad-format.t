# stats-job takes exactly one id.
c1 > stats-job x
c1 < BAD_FORMAT
c1 > stats-job 1\s
c1 < BAD_FORMAT
c1 > stats-job\s
c1 < BAD_FORMAT
c1 > stats-job
c1 < BAD_FORMAT
