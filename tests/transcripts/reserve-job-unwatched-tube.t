# reserve-job works on a job in a tube the connection does not watch.
c1 > use elsewhere
c1 < USING elsewhere
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c2 > reserve-job 1
c2 < RESERVED 1 1
c2 < a
c2 > list-tubes-watched
c2 < OK {len}
| ---
| - default
