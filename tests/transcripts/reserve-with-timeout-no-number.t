# 1.13: "reserve-with-timeout " with no number is BAD_FORMAT.
# 1.12 (strtol) read the empty string as 0 and answered TIMED_OUT.
c1 > reserve-with-timeout\s
c1 < BAD_FORMAT || 1.12: TIMED_OUT
