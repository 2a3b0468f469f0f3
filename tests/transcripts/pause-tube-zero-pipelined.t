# pause-tube with delay 0 ends the pause before the next command is read, even when
# that command came in the same packet: a waiting reserve already has the job.
c1 > put 0 0 60 1
c1 > a
c1 < INSERTED 1
c1 > pause-tube default 3600
c1 < PAUSED
c2 > reserve
c2 silent 100
c1 >> pause-tube default 0\r\nstats-job 1\r\n
c1 < PAUSED
c1 < OK {len}
| ---
| id: 1
| tube: "default" || 1.12: tube: default
| state: reserved
| pri: 0
| age: {0..1}
| delay: 0
| ttr: 60
| time-left: {58..60}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
c2 < RESERVED 1 1
c2 < a
