# With ttr 1 the safety margin starts at once: the next reserve answers DEADLINE_SOON.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve
c1 < DEADLINE_SOON
