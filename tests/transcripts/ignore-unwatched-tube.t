# Ignoring a tube that is not watched (existing or not) just answers the count.
c1 > ignore nosuch
c1 < WATCHING 1
c2 > use other
c2 < USING other
c1 > ignore other
c1 < WATCHING 1
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - other
