# kick's bound is parsed with strtoul and kept in 32 bits: 2^32 becomes 0 and kicks
# nothing, while -1 wraps to the largest count and kicks everything.
c1 >> put 0 100 10 1\r\na\r\nput 0 100 10 1\r\nb\r\n
c1 < INSERTED 1
c1 < INSERTED 2
c1 > kick 4294967296
c1 < KICKED 0
c1 > kick -1
c1 < KICKED 2
c1 > kick 99999999999999999999
c1 < BAD_FORMAT
