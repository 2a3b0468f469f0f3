# touch takes exactly one id.
c1 > touch x
c1 < BAD_FORMAT
c1 > touch 1\s
c1 < BAD_FORMAT
c1 > touch\s
c1 < BAD_FORMAT
c1 > touch
c1 < UNKNOWN_COMMAND
