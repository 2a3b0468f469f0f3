# A minus sign is not a digit: BAD_FORMAT.
c1 > put -1 0 10 1
c1 < BAD_FORMAT
c1 > put 0 0 10 -1
c1 < BAD_FORMAT
