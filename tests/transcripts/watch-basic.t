# watch adds a tube to the watch list and answers the new count.
c1 > watch a
c1 < WATCHING 2
c1 > watch b
c1 < WATCHING 3
c1 > list-tubes-watched
c1 < OK {len}
| ---
| - default
| - a
| - b
