# A NUL byte in a command line is BAD_FORMAT, whatever the command.
c1 > stats\0
c1 < BAD_FORMAT
c1 > use a\0b
c1 < BAD_FORMAT
c1 > \0
c1 < BAD_FORMAT
c1 > xyz\0
c1 < BAD_FORMAT
