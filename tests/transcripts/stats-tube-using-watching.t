# current-using and current-watching count connections, waiting counts blocked ones.
c1 > use t
c1 < USING t
c2 > use t
c2 < USING t
c2 > watch t
c2 < WATCHING 2
c3 > watch t
c3 < WATCHING 2
c3 > ignore default
c3 < WATCHING 1
c3 > reserve
c3 silent 100
c1 > stats-tube t
c1 < OK {len}
| ---
| name: "t" || 1.12: name: t
| current-jobs-urgent: 0
| current-jobs-ready: 0
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| total-jobs: 0
| current-using: 2
| current-watching: 2
| current-waiting: 1
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
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
| current-watching: 2
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
