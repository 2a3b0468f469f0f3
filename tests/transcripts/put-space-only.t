# "put " with no numbers is BAD_FORMAT; the body is not skipped but read as a command.
c1 > put\s
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
