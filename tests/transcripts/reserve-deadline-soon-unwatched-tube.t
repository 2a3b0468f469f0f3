# The safety margin belongs to the connection: a ttr-1 job held from a tube it does not
# watch still makes the next reserve answer DEADLINE_SOON.
c1 > use other
c1 < USING other
c1 > put 0 0 1 1
c1 > a
c1 < INSERTED 1
c1 > reserve-job 1
c1 < RESERVED 1 1
c1 < a
c1 > reserve
c1 < DEADLINE_SOON
