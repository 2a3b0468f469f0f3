# release sets the job's new priority and counts a release.
c1 > put 100 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > release 1 2000 0
c1 < RELEASED
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: ready
| pri: 2000
| age: {0..1}
| delay: 0
| ttr: 10
| time-left: 0
| file: 0
| reserves: 1
| timeouts: 0
| releases: 1
| buries: 0
| kicks: 0
