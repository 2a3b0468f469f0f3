# Using the tube already in use, twice, keeps current-using at 1.
c1 > use default
c1 < USING default
c1 > use default
c1 < USING default
c1 > stats-tube default
c1 < OK {len}
| ---
| name: "default" || 1.12: name: default
| current-jobs-urgent: 0
| current-jobs-ready: 0
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| total-jobs: 0
| current-using: 1
| current-watching: 1
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
