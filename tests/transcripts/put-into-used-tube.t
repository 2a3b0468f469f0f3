# put goes to the tube named by use; only a watcher of that tube gets it.
c1 > use jobs
c1 < USING jobs
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
c1 > watch jobs
c1 < WATCHING 2
c1 > reserve-with-timeout 0
c1 < RESERVED 1 1
c1 < a
