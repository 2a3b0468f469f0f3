# Commands sent behind a waiting reserve are answered only after the reserve is.
c1 > reserve
c1 > list-tube-used
c1 silent 200
c2 > put 0 0 10 1
c2 > a
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < a
c1 < USING default
