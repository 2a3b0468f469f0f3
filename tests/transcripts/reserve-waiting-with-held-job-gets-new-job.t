# A connection holding a ttr-2 job waits in reserve; a job put before its safety
# margin starts is handed to it instead of DEADLINE_SOON.
c1 > put 0 0 2 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve
c1 silent 200
c2 > put 0 0 10 1
c2 > b
c2 < INSERTED 2
c1 < RESERVED 2 1
c1 < b
