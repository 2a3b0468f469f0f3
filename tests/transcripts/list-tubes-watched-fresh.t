# A new connection watches default only.
c1 > list-tubes-watched
c1 < OK 14
| ---
| - default
