# peek-ready, peek-delayed and peek-buried are prefixes: "peek-readyx" is BAD_FORMAT,
# "peek-" and "peek-x" are unknown.
c1 > peek-readyx
c1 < BAD_FORMAT
c1 > peek-
c1 < UNKNOWN_COMMAND
c1 > peek-x
c1 < UNKNOWN_COMMAND
