# "kick" alone does not match "kick " and is an unknown command.
c1 > kick
c1 < UNKNOWN_COMMAND
