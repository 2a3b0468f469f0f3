# Touching a ttr-2 job after 1.2 s keeps it reserved past its original deadline.
c1 > put 0 0 2 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 silent 1200
c1 > touch 1
c1 < TOUCHED
c1 silent 1000
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {2..3}
| delay: 0
| ttr: 2
| time-left: 0
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
