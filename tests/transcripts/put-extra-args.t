# A fifth number after the size is trailing garbage: BAD_FORMAT, body read as a command.
c1 > put 0 0 10 1 5
c1 < BAD_FORMAT
c1 > x
c1 < UNKNOWN_COMMAND
