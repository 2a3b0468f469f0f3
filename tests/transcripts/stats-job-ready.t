# stats-job of a ready job in a named tube: every field, in order.
c1 > use work
c1 < USING work
c1 > put 1500 0 30 4
c1 > data
c1 < INSERTED 1
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "work" || 1.12: tube: work
| state: ready
| pri: 1500
| age: {0..1}
| delay: 0
| ttr: 30
| time-left: 0
| file: 0
| reserves: 0
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
