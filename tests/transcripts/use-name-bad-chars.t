# Any other byte in a tube name is BAD_FORMAT.
c1 > use a*b
c1 < BAD_FORMAT
c1 > use a:b
c1 < BAD_FORMAT
c1 > use a\xffb
c1 < BAD_FORMAT
c1 > use a,b
c1 < BAD_FORMAT
c1 > use \{a\}
c1 < BAD_FORMAT
