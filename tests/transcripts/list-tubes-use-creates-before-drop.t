# use creates the new tube before it lets go of the old one: default a b, then
# "use c" on a's only user appends c and then drops a, moving c into a's slot.
c1 > use a
c1 < USING a
c2 > use b
c2 < USING b
c1 > use c
c1 < USING c
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - c
| - b
