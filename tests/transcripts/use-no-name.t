# "use" alone is an unknown command; "use " with no name is BAD_FORMAT.
c1 > use
c1 < UNKNOWN_COMMAND
c1 > use\s
c1 < BAD_FORMAT
