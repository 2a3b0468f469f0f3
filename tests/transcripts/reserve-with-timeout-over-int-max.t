# 1.13: a timeout above 2147483647 is BAD_FORMAT.
# 1.12 (strtol into an int) waited with a huge timeout.
c1 > reserve-with-timeout 2147483648
1.13: c1 < BAD_FORMAT
1.12: c1 silent 300
