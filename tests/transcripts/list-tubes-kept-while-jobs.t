# A tube with jobs in it stays after the last connection leaves it, and goes with the
# last job.
c1 > use keep
c1 < USING keep
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > use default
c1 < USING default
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - keep
c1 > delete 1
c1 < DELETED
c1 > list-tubes
c1 < OK {len}
| ---
| - default
