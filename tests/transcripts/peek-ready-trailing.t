# peek-ready takes no argument: trailing bytes are BAD_FORMAT.
c1 > peek-readyx
c1 < BAD_FORMAT
c1 > peek-ready\s
c1 < BAD_FORMAT
c1 > peek-ready 1
c1 < BAD_FORMAT
