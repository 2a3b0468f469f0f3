# Commands refused with BAD_FORMAT before parsing completes do not count in cmd-*.
c1 >> delete x\r\npeek x\r\nstats-job x\r\nuse -x\r\nwatch -x\r\nignore -x\r\ntouch x\r\nrelease x\r\nbury x\r\nkick x\r\nreserve x\r\nlist-tubes x\r\npeek-ready x\r\nstats x\r\n
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 < BAD_FORMAT
c1 > stats
c1 < OK {len}
| ---
| current-jobs-urgent: 0
| current-jobs-ready: 0
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| cmd-put: 0
| cmd-peek: 0
| cmd-peek-ready: 0
| cmd-peek-delayed: 0
| cmd-peek-buried: 0
| cmd-reserve: 0
| cmd-reserve-with-timeout: 0
| cmd-delete: 0
| cmd-release: 0
| cmd-use: 0
| cmd-watch: 0
| cmd-ignore: 0
| cmd-bury: 0
| cmd-kick: 0
| cmd-touch: 0
| cmd-stats: 1
| cmd-stats-job: 0
| cmd-stats-tube: 0
| cmd-list-tubes: 0
| cmd-list-tube-used: 0
| cmd-list-tubes-watched: 0
| cmd-pause-tube: 0
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
