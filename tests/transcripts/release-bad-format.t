# release takes id, priority and delay, nothing more or less.
c1 > release 1 0
c1 < BAD_FORMAT
c1 > release 1 0 0\s
c1 < BAD_FORMAT
c1 > release 1 0 0 0
c1 < BAD_FORMAT
c1 > release 1 4294967296 0
c1 < BAD_FORMAT
c1 > release x 0 0
c1 < BAD_FORMAT
c1 > release
c1 < UNKNOWN_COMMAND
