# Every counter after a scripted sequence over two connections and three tubes.
c1 > use t1
c1 < USING t1
c1 >> put 1 0 10 1\r\na\r\nput 2000 0 10 1\r\nb\r\nput 5 100 10 1\r\nc\r\nput 6 0 10 1\r\nd\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 < INSERTED 4
c2 > watch t1
c2 < WATCHING 2
c2 > watch t2
c2 < WATCHING 3
c2 > ignore t2
c2 < WATCHING 2
c2 >> reserve\r\nreserve-with-timeout 0\r\nreserve-with-timeout 0\r\n
c2 < RESERVED 1 1
c2 < a
c2 < RESERVED 4 1
c2 < d
c2 < RESERVED 2 1
c2 < b
c2 > bury 4 3
c2 < BURIED
c2 > release 2 2000 0
c2 < RELEASED
c2 > touch 1
c2 < TOUCHED
c1 >> peek 1\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\n
c1 < FOUND 1 1
c1 < a
c1 < FOUND 2 1
c1 < b
c1 < FOUND 3 1
c1 < c
c1 < FOUND 4 1
c1 < d
c1 > kick 0
c1 < KICKED 0
c1 > delete 99
c1 < NOT_FOUND
c1 > stats-job 1
c1 < OK {len}
| ---
| id: 1
| tube: "t1" || 1.12: tube: t1
| state: reserved
| pri: 1
| age: {0..1}
| delay: 0
| ttr: 10
| time-left: {9..10}
| file: 0
| reserves: 1
| timeouts: 0
| releases: 0
| buries: 0
| kicks: 0
c1 > pause-tube t1 0
c1 < PAUSED
c1 >> list-tubes\r\nlist-tube-used\r\nlist-tubes-watched\r\n
c1 < OK {len}
| ---
| - default
| - t1
c1 < USING t1
c1 < OK {len}
| ---
| - default
c1 > stats
c1 < OK {len}
| ---
| current-jobs-urgent: 0
| current-jobs-ready: 1
| current-jobs-reserved: 1
| current-jobs-delayed: 1
| current-jobs-buried: 1
| cmd-put: 4
| cmd-peek: 1
| cmd-peek-ready: 1
| cmd-peek-delayed: 1
| cmd-peek-buried: 1
| cmd-reserve: 1
| cmd-reserve-with-timeout: 2
| cmd-delete: 1
| cmd-release: 1
| cmd-use: 1
| cmd-watch: 2
| cmd-ignore: 1
| cmd-bury: 1
| cmd-kick: 1
| cmd-touch: 1
| cmd-stats: 1
| cmd-stats-job: 1
| cmd-stats-tube: 0
| cmd-list-tubes: 1
| cmd-list-tube-used: 1
| cmd-list-tubes-watched: 1
| cmd-pause-tube: 1
| job-timeouts: 0
| total-jobs: 4
| max-job-size: 65535
| current-tubes: 2
| current-connections: 2
| current-producers: 1
| current-workers: 1
| current-waiting: 0
| total-connections: 2
| pid: {pid}
| version: "1.13" || 1.12: version: "1.12"
| rusage-utime: {rusage}
| rusage-stime: {rusage}
| uptime: {uptime}
| binlog-oldest-index: 0
| binlog-current-index: 0
| binlog-records-migrated: 0
| binlog-records-written: 0
| binlog-max-size: 10485760
| draining: false
| id: {id}
| hostname: "{hostname}" || 1.12: hostname: {hostname}
| os: "{os}" || 1.12: os: {os}
| platform: "{platform}" || 1.12: platform: {platform}
