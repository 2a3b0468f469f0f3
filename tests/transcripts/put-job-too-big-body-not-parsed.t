%max-job-size 10
# Command lines inside a refused body are thrown away with it, never executed.
c1 >> put 0 0 10 31\r\nuse bad\r\nlist-tube-used\r\nquit\r\n\r\n
c1 < JOB_TOO_BIG
c1 > list-tube-used
c1 < USING default
