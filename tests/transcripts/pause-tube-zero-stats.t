# After pause-tube with delay 0 the tube shows pause 0 and no time left.
c1 > pause-tube default 60
c1 < PAUSED
c1 > pause-tube default 0
c1 < PAUSED
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
| cmd-pause-tube: 2
| pause: 0
| pause-time-left: 0
