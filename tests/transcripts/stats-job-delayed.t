# stats-job of a delayed job: state delayed, delay as given, time-left until ready.
c1 > put 0 50 10 1
c1 > a
c1 < INSERTED 1
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: delayed
| pri: 0
| age: {0..1}
| delay: 50
| ttr: 10
| time-left: {48..49}
| file: 0
| reserves: 0
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
