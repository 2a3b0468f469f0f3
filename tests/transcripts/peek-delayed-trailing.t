# peek-delayed takes no argument: trailing bytes are BAD_FORMAT.
c1 > peek-delayedx
c1 < BAD_FORMAT
c1 > peek-delayed\s
c1 < BAD_FORMAT
