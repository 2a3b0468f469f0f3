# kick 0 kicks nothing.
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c1 > kick 0
c1 < KICKED 0
