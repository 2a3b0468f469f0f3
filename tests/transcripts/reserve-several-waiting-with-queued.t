# Two connections wait in reserve on tubes of their own, each with commands queued
# behind the reserve; one put each answers them, and each runs its queued commands.
c1 >> watch a\r\nignore default\r\nreserve\r\nput 0 0 60 2\r\nc1\r\nlist-tubes-watched\r\n
c1 < WATCHING 2
c1 < WATCHING 1
c2 >> watch b\r\nignore default\r\nreserve\r\nuse b\r\nstats-job 1\r\n
c2 < WATCHING 2
c2 < WATCHING 1
c3 > use b
c3 < USING b
c3 > put 5 0 60 1
c3 > x
c3 < INSERTED 1
c2 < RESERVED 1 1
c2 < x
c2 < USING b
c2 < OK {len}
| ---
| id: 1
| tube: "b" || 1.12: tube: b
| state: reserved
| pri: 5
| age: {age}
| delay: 0
| ttr: 60
| time-left: {time-left}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
c3 > use a
c3 < USING a
c3 > put 0 0 60 1
c3 > y
c3 < INSERTED 2
c1 < RESERVED 2 1
c1 < y
c1 < INSERTED 3
c1 < OK {len}
| ---
| - a
