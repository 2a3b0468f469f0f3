# 1.13 reads the timeout as an unsigned number: "abc" is BAD_FORMAT.
# 1.12 used strtol, which read "abc" as 0 and answered TIMED_OUT at once.
c1 > reserve-with-timeout abc
c1 < BAD_FORMAT || 1.12: TIMED_OUT
