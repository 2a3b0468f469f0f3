# With nothing buried, kick makes delayed jobs ready, soonest deadline first.
c1 >> put 0 200 10 1\r\na\r\nput 0 100 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > kick 1
c1 < KICKED 1
c1 > peek-ready
c1 < FOUND 2 1
c1 < b
c1 > stats-job 2
c1 < OK {len}
| ---
| id: 2
| tube: "default" || 1.12: tube: default
| state: ready
| pri: 0
| age: {0..1}
| delay: 100
| ttr: 10
| time-left: 0
| file: 0
| reserves: 0
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 1
