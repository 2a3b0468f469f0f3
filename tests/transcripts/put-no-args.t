# "put" alone does not match "put " and is an unknown command.
c1 > put
c1 < UNKNOWN_COMMAND
