# Words that are no command are UNKNOWN_COMMAND; the connection stays usable.
c1 > hello
c1 < UNKNOWN_COMMAND
c1 > put-job 1
c1 < UNKNOWN_COMMAND
c1 > \sstats
c1 < UNKNOWN_COMMAND
