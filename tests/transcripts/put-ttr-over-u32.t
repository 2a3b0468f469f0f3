# A ttr of 2^32 seconds is BAD_FORMAT.
c1 > put 0 0 4294967296 1
c1 < BAD_FORMAT
