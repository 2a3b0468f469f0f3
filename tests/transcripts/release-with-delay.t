# release with a delay makes the job delayed, with the new delay in stats-job.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > release 1 0 100
c1 < RELEASED
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: delayed
| pri: 0
| age: {0..1}
| delay: 100
| ttr: 10
| time-left: {99..100}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 1
| buries: 0
| kicks: 0
