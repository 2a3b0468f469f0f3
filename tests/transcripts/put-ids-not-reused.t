# Deleting the newest job does not give its id back.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > delete 1
c1 < DELETED
c1 > put 0 0 10 1
c1 > b
c1 < INSERTED 2
