# stats-job of a reserved job: state reserved, time-left counts down from the ttr.
c1 > put 0 0 30 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > stats-job 1
c2 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {0..1}
| delay: 0
| ttr: 30
| time-left: {28..29}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
