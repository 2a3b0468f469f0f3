# An empty line is an unknown command.
c1 >
c1 < UNKNOWN_COMMAND
c1 >> \r\n\r\n
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
