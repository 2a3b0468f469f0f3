# A priority of 2^32 is BAD_FORMAT (the body is then read as a command).
c1 > put 4294967296 0 10 1
c1 < BAD_FORMAT
c1 > a
c1 < UNKNOWN_COMMAND
