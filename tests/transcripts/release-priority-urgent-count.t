# Releasing with a priority of 1024 or more takes the job out of the urgent count.
c1 > put 10 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > release 1 1024 0
c1 < RELEASED
c1 > stats-tube default
c1 < OK {len}
| ---
| name: "default" || 1.12: name: default
| current-jobs-urgent: 0
| current-jobs-ready: 1
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| total-jobs: 1
| current-using: 1
| current-watching: 1
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
