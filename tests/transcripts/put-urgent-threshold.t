# Priority below 1024 counts as urgent; 1024 does not.
c1 > put 1023 0 10 1
c1 > a
c1 < INSERTED 1
c1 > put 1024 0 10 1
c1 > b
c1 < INSERTED 2
c1 > stats-tube default
c1 < OK {len}
| ---
| name: "default" || 1.12: name: default
| current-jobs-urgent: 1
| current-jobs-ready: 2
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| total-jobs: 2
| current-using: 1
| current-watching: 1
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
