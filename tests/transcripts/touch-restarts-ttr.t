# touch gives the job its full ttr again: a ttr-2 job touched after a second is not
# in the safety margin any more, while it was before the touch.
c1 > put 0 0 2 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 silent 1100
c1 > reserve-with-timeout 0
c1 < DEADLINE_SOON
c1 > touch 1
c1 < TOUCHED
c1 > reserve-with-timeout 0
c1 < TIMED_OUT
