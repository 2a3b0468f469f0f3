# bury takes an id and a priority.
c1 > bury 1
c1 < BAD_FORMAT
c1 > bury 1 0\s
c1 < BAD_FORMAT
c1 > bury 1 0 0
c1 < BAD_FORMAT
c1 > bury x 0
c1 < BAD_FORMAT
c1 > bury
c1 < UNKNOWN_COMMAND
