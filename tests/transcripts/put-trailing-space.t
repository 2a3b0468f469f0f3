# A space after the body size is trailing garbage: BAD_FORMAT, and the body is then
# read as a command line of its own.
c1 > put 0 0 10 5\s
c1 < BAD_FORMAT
c1 > hello
c1 < UNKNOWN_COMMAND
