# A tube no connection uses or watches and that holds no job disappears.
c1 > use a
c1 < USING a
c1 > use default
c1 < USING default
c1 > watch b
c1 < WATCHING 2
c1 > ignore b
c1 < WATCHING 1
c1 > list-tubes
c1 < OK {len}
| ---
| - default
