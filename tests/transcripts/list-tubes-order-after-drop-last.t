# Dropping the last tube of the list leaves the others in place; a tube created again
# goes to the end.
c1 > use a
c1 < USING a
c2 > use b
c2 < USING b
c2 > use default
c2 < USING default
c2 > watch x
c2 < WATCHING 2
c2 > watch b
c2 < WATCHING 3
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - a
| - x
| - b
