%max-job-size 10
# The size limit is checked before trailing garbage: an oversized put with junk after
# the size is JOB_TOO_BIG, and its body is skipped.
c1 >> put 0 0 10 11x\r\n0123456789a\r\n
c1 < JOB_TOO_BIG
