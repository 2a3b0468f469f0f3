# Well-formed commands answered NOT_FOUND still count in their cmd-* counters.
c1 >> peek 9\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\nstats-job 9\r\nstats-tube nosuch\r\n
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 >> pause-tube nosuch 1\r\ndelete 9\r\nrelease 9 0 0\r\nbury 9 0\r\ntouch 9\r\nkick-job 9\r\nreserve-job 9\r\n
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 < NOT_FOUND
c1 > stats
c1 < OK {len}
| ---
| current-jobs-urgent: 0
| current-jobs-ready: 0
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| cmd-put: 0
| cmd-peek: 1
| cmd-peek-ready: 1
| cmd-peek-delayed: 1
| cmd-peek-buried: 1
| cmd-reserve: 0
| cmd-reserve-with-timeout: 0
| cmd-delete: 1
| cmd-release: 1
| cmd-use: 0
| cmd-watch: 0
| cmd-ignore: 0
| cmd-bury: 1
| cmd-kick: 0
| cmd-touch: 1
| cmd-stats: 1
| cmd-stats-job: 1
| cmd-stats-tube: 1
| cmd-list-tubes: 0
| cmd-list-tube-used: 0
| cmd-list-tubes-watched: 0
| cmd-pause-tube: 1
| job-timeouts: 0
| total-jobs: 0
| max-job-size: 65535
| current-tubes: 1
| current-connections: 1
| current-producers: 0
| current-workers: 0
| current-waiting: 0
| total-connections: 1
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
