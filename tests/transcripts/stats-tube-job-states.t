# stats-tube counts the tube's jobs in each state.
c1 > use t
c1 < USING t
c1 > watch t
c1 < WATCHING 2
c1 >> put 1 0 10 1\r\na\r\nput 2 0 10 1\r\nb\r\nput 3 0 10 1\r\nc\r\nput 4 10 10 1\r\nd\r\nput 2000 0 10 1\r\ne\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 < INSERTED 3
c1 < INSERTED 4
c1 < INSERTED 5
c1 >> reserve\r\nreserve\r\nbury 2 0\r\n
c1 < RESERVED 1 1
c1 < a
c1 < RESERVED 2 1
c1 < b
c1 < BURIED
c1 > stats-tube t
c1 < OK {len}
| ---
| name: "t" || 1.12: name: t
| current-jobs-urgent: 1
| current-jobs-ready: 2
| current-jobs-reserved: 1
| current-jobs-delayed: 1
| current-jobs-buried: 1
| total-jobs: 5
| current-using: 1
| current-watching: 1
| current-waiting: 0
| cmd-delete: 0
| cmd-pause-tube: 0
| pause: 0
| pause-time-left: 0
