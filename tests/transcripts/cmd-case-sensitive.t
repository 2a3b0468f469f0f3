# Command names are case-sensitive.
c1 > PUT 0 0 10 1
c1 < UNKNOWN_COMMAND
c1 > a
c1 < UNKNOWN_COMMAND
c1 > Stats
c1 < UNKNOWN_COMMAND
c1 > RESERVE
c1 < UNKNOWN_COMMAND
c1 > List-tubes
c1 < UNKNOWN_COMMAND
