# QUIT in capitals is not quit: the connection stays open.
c1 > QUIT
c1 < UNKNOWN_COMMAND
