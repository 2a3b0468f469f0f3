# A reserved job not deleted within its ttr (1 s) goes back to ready: after the ttr,
# the holder sends an unrelated command (which also makes beanstalkd notice a deadline
# it may have missed), and then another connection reserves the job, which counts one
# timeout and two reserves.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 silent 1200
c1 > list-tube-used
c1 < USING default
c2 > reserve-with-timeout 0
c2 < RESERVED 1 1
c2 < a
c2 > stats-job 1
c2 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {1..2}
| delay: 0
| ttr: 1
| time-left: 0
| file: 0
| reserves: 2
| timeouts: 1
| releases: 0
| buries: 0
| kicks: 0
