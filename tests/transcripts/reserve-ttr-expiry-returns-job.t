%skip beanstalkd beanstalkd (1.12, and 1.13 has the same code) sometimes leaves a job whose holder stays silent reserved past its TTR until the holder sends something: its timer re-checks deadline >= now at microsecond resolution and on a tie drops the holder from its timer heap; see reserve-ttr-expiry-holder-active for the oracle-checked form
# A reserved job not deleted within its ttr (1 s) goes back to ready and a reserve
# waiting on another connection gets it, while the holder stays silent.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c2 > reserve-with-timeout 3
c2 silent 500
c2 < RESERVED 1 1
c2 < a
c2 > stats-job 1
c2 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {0..2}
| delay: 0
| ttr: 1
| time-left: 0
| file: 0
| reserves: 2
| timeouts: 1
| releases: 0
| buries: 0
| kicks: 0
