# After ignore, jobs in the ignored tube are not handed out.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > watch other
c1 < WATCHING 2
c1 > ignore default
c1 < WATCHING 1
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
