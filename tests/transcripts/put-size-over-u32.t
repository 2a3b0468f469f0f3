# A size of 2^32 is BAD_FORMAT, not JOB_TOO_BIG: nothing is skipped.
c1 > put 0 0 10 4294967296
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
