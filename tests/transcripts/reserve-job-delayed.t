# reserve-job reserves a delayed job at once.
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve-job 1
c1 < RESERVED 1 1
c1 < a
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {0..1}
| delay: 100
| ttr: 10
| time-left: {9..10}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
