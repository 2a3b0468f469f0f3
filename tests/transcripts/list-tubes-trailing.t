# list-tubes takes no argument: anything after it is BAD_FORMAT.
c1 > list-tubesx
c1 < BAD_FORMAT
c1 > list-tubes\s
c1 < BAD_FORMAT
c1 > list-tubes default
c1 < BAD_FORMAT
