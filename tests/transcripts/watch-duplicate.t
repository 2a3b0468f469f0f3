# Watching a tube already watched leaves the count alone.
c1 > watch a
c1 < WATCHING 2
c1 > watch a
c1 < WATCHING 2
c1 > watch default
c1 < WATCHING 2
