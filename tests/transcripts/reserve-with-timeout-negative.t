# 1.13: a negative timeout is BAD_FORMAT.
# 1.12 (strtol) took -1 as "no timeout" and waited like reserve.
c1 > reserve-with-timeout -1
1.13: c1 < BAD_FORMAT
1.12: c1 silent 300
