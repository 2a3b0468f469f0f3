# peek-buried takes no argument: trailing bytes are BAD_FORMAT.
c1 > peek-buriedx
c1 < BAD_FORMAT
c1 > peek-buried\s
c1 < BAD_FORMAT
