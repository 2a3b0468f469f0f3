# peek-buried with no buried job in the used tube is NOT_FOUND.
c1 > peek-buried
c1 < NOT_FOUND
