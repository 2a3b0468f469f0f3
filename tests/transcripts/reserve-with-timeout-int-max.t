# 2147483647 (2^31-1) is the largest timeout accepted: the reserve waits.
c1 > reserve-with-timeout 2147483647
c1 silent 200
