# default stays even when no connection uses or watches it.
c1 > use a
c1 < USING a
c1 > watch a
c1 < WATCHING 2
c1 > ignore default
c1 < WATCHING 1
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - a
