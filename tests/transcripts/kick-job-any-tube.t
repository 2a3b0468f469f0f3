# kick-job works on a job in any tube, not just the used one.
c1 > use other
c1 < USING other
c1 > put 0 100 10 1
c1 > a
c1 < INSERTED 1
c2 > kick-job 1
c2 < KICKED
c2 > list-tube-used
c2 < USING default
c1 > peek-ready
c1 < FOUND 1 1
c1 < a
