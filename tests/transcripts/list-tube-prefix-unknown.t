# "list-tube" and "list" are only the start of command names: UNKNOWN_COMMAND.
c1 > list-tube
c1 < UNKNOWN_COMMAND
c1 > list
c1 < UNKNOWN_COMMAND
