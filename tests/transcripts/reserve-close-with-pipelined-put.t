# A client that closes its socket while its reserve waits, with a put queued behind
# the reserve: the put is never applied (beanstalkd writes TIMED_OUT, applies the
# next command, peek-ready, and its reply's write fails), so the other waiting
# connection stays waiting and no job exists that no producer saw acknowledged.
c1 >> reserve\r\npeek-ready\r\nput 512 0 60 0\r\n\r\n
c1 silent 100
c3 > reserve
c3 silent 100
c1 close
c3 silent 300
c2 > peek 1
c2 < NOT_FOUND
c2 > stats-tube default
c2 < OK {len}
| ---
| name: "default" || 1.12: name: default
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
c3 silent 100
