# A tube name may not start with "-", but may contain one later.
c1 > use -foo
c1 < BAD_FORMAT
c1 > use foo-
c1 < USING foo-
