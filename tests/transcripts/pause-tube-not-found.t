# pause-tube of a tube that does not exist is NOT_FOUND.
c1 > pause-tube nosuch 10
c1 < NOT_FOUND
