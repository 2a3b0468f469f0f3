# reserve takes no argument: anything after it is BAD_FORMAT.
c1 > reserve 0
c1 < BAD_FORMAT
c1 > reserve\s
c1 < BAD_FORMAT
