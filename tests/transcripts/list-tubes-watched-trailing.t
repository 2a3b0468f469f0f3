# list-tubes-watched takes no argument: anything after it is BAD_FORMAT.
c1 > list-tubes-watchedx
c1 < BAD_FORMAT
c1 > list-tubes-watched\s
c1 < BAD_FORMAT
