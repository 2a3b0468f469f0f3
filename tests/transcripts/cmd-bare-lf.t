# A bare LF does not end a line: "stats\nstats" is one line, and BAD_FORMAT.
c1 >> stats\nstats\r\n
c1 < BAD_FORMAT
