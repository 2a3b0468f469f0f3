# The last watched tube cannot be ignored: NOT_IGNORED.
c1 > ignore default
c1 < NOT_IGNORED
c1 > watch a
c1 < WATCHING 2
c1 > ignore a
c1 < WATCHING 1
c1 > ignore default
c1 < NOT_IGNORED
