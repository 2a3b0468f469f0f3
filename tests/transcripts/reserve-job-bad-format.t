# reserve-job takes exactly one id: junk, a trailing space or a missing id are BAD_FORMAT.
c1 > reserve-job x
c1 < BAD_FORMAT
c1 > reserve-job 1\s
c1 < BAD_FORMAT
c1 > reserve-job 1 2
c1 < BAD_FORMAT
c1 > reserve-job\s
c1 < BAD_FORMAT
c1 > reserve-job
c1 < BAD_FORMAT
