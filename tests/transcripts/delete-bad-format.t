# delete takes exactly one id.
c1 > delete abc
c1 < BAD_FORMAT
c1 > delete 1x
c1 < BAD_FORMAT
c1 > delete 1\s
c1 < BAD_FORMAT
c1 > delete 1 2
c1 < BAD_FORMAT
c1 > delete -1
c1 < BAD_FORMAT
c1 > delete\s
c1 < BAD_FORMAT
