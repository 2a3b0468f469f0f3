# "list-tubes-watch" starts with "list-tubes" and so is a list-tubes with junk: BAD_FORMAT.
c1 > list-tubes-watch
c1 < BAD_FORMAT
c1 > list-tube-use
c1 < UNKNOWN_COMMAND
