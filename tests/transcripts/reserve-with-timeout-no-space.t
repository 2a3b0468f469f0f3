# "reserve-with-timeout" without a space matches the reserve prefix: BAD_FORMAT.
c1 > reserve-with-timeout
c1 < BAD_FORMAT
