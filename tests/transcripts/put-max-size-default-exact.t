# The default maximum job size is 65535: a body of exactly that size is accepted.
c1 > put 0 0 10 65535
c1 > {65535*x}
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 65535
c1 < {65535*x}
