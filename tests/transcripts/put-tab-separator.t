# Only spaces separate numbers: a tab is BAD_FORMAT, a tab after "put" is unknown.
c1 > put 0\t0 10 1
c1 < BAD_FORMAT
c1 > put\t0 0 10 1
c1 < UNKNOWN_COMMAND
