# age counts whole seconds since the put.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 silent 1100
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: ready
| pri: 0
| age: 1
| delay: 0
| ttr: 10
| time-left: 0
| file: 0
| reserves: 0
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
