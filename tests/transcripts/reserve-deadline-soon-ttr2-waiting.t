# A reserve waiting while holding a ttr-2 job is answered DEADLINE_SOON when the
# 1-second safety margin starts, about a second later.
c1 > put 0 0 2 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > reserve
c1 silent 600
c1 < DEADLINE_SOON
