# ignore checks tube names like use and watch.
c1 > ignore -a
c1 < BAD_FORMAT
c1 > ignore a\s
c1 < BAD_FORMAT
c1 > ignore {201*a}
c1 < BAD_FORMAT
c1 > ignore\s
c1 < BAD_FORMAT
c1 > ignore
c1 < UNKNOWN_COMMAND
