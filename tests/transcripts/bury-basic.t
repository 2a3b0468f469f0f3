# bury moves a reserved job to buried, with a new priority, and counts a bury.
c1 > put 5 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 7
c1 < BURIED
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: buried
| pri: 7
| age: {0..1}
| delay: 0
| ttr: 10
| time-left: 0
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 1
| kicks: 0
