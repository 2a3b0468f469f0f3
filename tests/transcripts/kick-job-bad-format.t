# kick-job takes exactly one id; "kick-job" alone (no space) is an unknown command.
c1 > kick-job x
c1 < BAD_FORMAT
c1 > kick-job 1\s
c1 < BAD_FORMAT
c1 > kick-job\s
c1 < BAD_FORMAT
c1 > kick-job
c1 < UNKNOWN_COMMAND
