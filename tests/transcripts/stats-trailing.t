# stats takes no argument: anything after it is BAD_FORMAT.
c1 > statsx
c1 < BAD_FORMAT
c1 > stats\s
c1 < BAD_FORMAT
c1 > stats-tube
c1 < BAD_FORMAT
c1 > stats-jobx
c1 < BAD_FORMAT
