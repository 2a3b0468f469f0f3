# Tubes used or watched only by a connection that quits are dropped.
c1 > use gone1
c1 < USING gone1
c1 > watch gone2
c1 < WATCHING 2
c1 > quit
c1 eof
c2 > list-tubes
c2 < OK {len}
| ---
| - default
