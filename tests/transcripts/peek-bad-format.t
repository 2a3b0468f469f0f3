# peek takes exactly one id; "peek" alone is an unknown command.
c1 > peek x
c1 < BAD_FORMAT
c1 > peek 1\s
c1 < BAD_FORMAT
c1 > peek\s
c1 < BAD_FORMAT
c1 > peek
c1 < UNKNOWN_COMMAND
c1 > peekx 1
c1 < UNKNOWN_COMMAND
