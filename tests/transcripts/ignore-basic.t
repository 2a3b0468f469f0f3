# ignore removes a tube from the watch list and answers the new count.
c1 > watch a
c1 < WATCHING 2
c1 > ignore default
c1 < WATCHING 1
c1 > list-tubes-watched
c1 < OK {len}
| ---
| - a
