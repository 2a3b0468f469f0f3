# kick-job makes a buried job ready and counts a kick.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > bury 1 0
c1 < BURIED
c1 > kick-job 1
c1 < KICKED
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: ready
| pri: 0
| age: {0..1}
| delay: 0
| ttr: 10
| time-left: 0
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 1
| kicks: 1
