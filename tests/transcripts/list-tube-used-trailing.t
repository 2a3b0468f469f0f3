# list-tube-used takes no argument: anything after it is BAD_FORMAT.
c1 > list-tube-usedx
c1 < BAD_FORMAT
c1 > list-tube-used\s
c1 < BAD_FORMAT
