# Jobs reserved by a connection that closes go back to ready; a waiting reserve on
# another connection gets them.
c1 > put 0 0 60 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > reserve-with-timeout 5
c2 silent 100
c1 close
c2 < RESERVED 1 1
c2 < a
c2 > stats-job 1
c2 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {0..1}
| delay: 0
| ttr: 60
| time-left: {58..59}
| file: 0
| reserves: 2
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
