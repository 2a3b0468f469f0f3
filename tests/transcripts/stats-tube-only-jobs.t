# A tube kept alive only by its jobs has no users or watchers.
c1 > use kept
c1 < USING kept
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > use default
c1 < USING default
c1 > stats-tube kept
c1 < OK {len}
| ---
| name: "kept" || 1.12: name: kept
| current-jobs-urgent: 1
| current-jobs-ready: 1
| current-jobs-reserved: 0
| current-jobs-delayed: 0
| current-jobs-buried: 0
| total-jobs: 1
| current-using: 0
| current-watching: 0
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
