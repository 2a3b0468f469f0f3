# "delete" alone does not match "delete " and is an unknown command.
c1 > delete
c1 < UNKNOWN_COMMAND
