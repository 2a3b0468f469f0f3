# kick works on the used tube only.
c1 > use other
c1 < USING other
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c2 > kick 10
c2 < KICKED 0
c1 > kick 10
c1 < KICKED 1
