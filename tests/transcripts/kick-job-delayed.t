# kick-job makes a delayed job ready at once.
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > kick-job 1
c1 < KICKED
c1 > reserve-with-timeout 0
c1 < RESERVED 1 1
c1 < a
