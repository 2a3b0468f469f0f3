# stats-tube of a tube that does not exist is NOT_FOUND.
c1 > stats-tube nosuch
c1 < NOT_FOUND
