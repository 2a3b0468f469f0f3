# "stats-job" without a space matches the stats prefix and has trailing bytes: BAD_FORMAT.
c1 > stats-job
c1 < BAD_FORMAT
c1 > stats-jobs 1
c1 < BAD_FORMAT
