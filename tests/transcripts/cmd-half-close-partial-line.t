# A half-close in the middle of a command line: the partial line is dropped unanswered
# and the connection is closed.
c1 >> list-tube-u
c1 silent 100
c1 shutdown
c1 eof
