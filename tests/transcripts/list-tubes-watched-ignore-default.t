# Ignoring default (first) moves the last watched tube to the front: default a b -> b a.
c1 > watch a
c1 < WATCHING 2
c1 > watch b
c1 < WATCHING 3
c1 > ignore default
c1 < WATCHING 2
c1 > list-tubes-watched
c1 < OK {len}
| ---
| - b
| - a
