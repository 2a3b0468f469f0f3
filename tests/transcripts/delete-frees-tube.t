# Deleting the last job of a tube nobody uses drops the tube.
c1 > use t
c1 < USING t
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > use default
c1 < USING default
c1 > delete 1
c1 < DELETED
c1 > stats-tube t
c1 < NOT_FOUND
