# A space after the tube name is BAD_FORMAT, as is a second word.
c1 > use foo\s
c1 < BAD_FORMAT
c1 > use foo bar
c1 < BAD_FORMAT
