# The default maximum job size is 65535: 65536 bytes are too big.
c1 > put 0 0 10 65536
c1 > {65536*x}
c1 < JOB_TOO_BIG
