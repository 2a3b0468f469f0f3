# Once the job near its deadline is deleted, reserve waits normally again.
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve-with-timeout 0
c1 < DEADLINE_SOON
c1 > delete 1
c1 < DELETED
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
