# Buried jobs count in current-jobs-buried for the server and the tube.
c1 >> put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\nreserve\r\nreserve\r\nbury 1 0\r\nbury 2 0\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < RESERVED 1 1
c1 < a
c1 < RESERVED 2 1
c1 < b
c1 < BURIED
c1 < BURIED
c1 > stats-tube default
c1 < OK {len}
| ---
| name: "default" || 1.12: name: default
| current-jobs-urgent: 0
| current-jobs-ready: 0
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 2
| total-jobs: 2
| current-using: 1
| current-watching: 1
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
