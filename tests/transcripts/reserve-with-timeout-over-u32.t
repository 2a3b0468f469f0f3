# 1.13: 2^32 does not fit in 32 bits: BAD_FORMAT.
# 1.12 truncated strtol's 4294967296 to an int 0 and answered TIMED_OUT at once.
c1 > reserve-with-timeout 4294967296
c1 < BAD_FORMAT || 1.12: TIMED_OUT
