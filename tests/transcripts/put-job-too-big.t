%max-job-size 10
# One byte over the maximum: JOB_TOO_BIG after the body is read and thrown away; the
# command that follows in the same send is parsed normally.
c1 >> put 0 0 10 11\r\n0123456789a\r\nlist-tube-used\r\n
c1 < JOB_TOO_BIG
c1 < USING default
