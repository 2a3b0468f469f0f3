# A second space before the tube name is BAD_FORMAT (the name would start with a space).
c1 > use  foo
c1 < BAD_FORMAT
