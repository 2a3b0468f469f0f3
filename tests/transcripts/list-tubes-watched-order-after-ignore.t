# Ignoring a tube moves the last watched tube into its slot:
# default a b c, ignore a: default c b.
c1 > watch a
c1 < WATCHING 2
c1 > watch b
c1 < WATCHING 3
c1 > watch c
c1 < WATCHING 4
c1 > ignore a
c1 < WATCHING 3
c1 > list-tubes-watched
c1 < OK {len}
| ---
| - default
| - c
| - b
