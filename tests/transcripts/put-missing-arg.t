# Three numbers instead of four: BAD_FORMAT.
c1 > put 0 0 10
c1 < BAD_FORMAT
