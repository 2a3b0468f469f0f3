# pause-tube needs a name and a delay and nothing after them.
c1 > pause-tube default
c1 < BAD_FORMAT
c1 > pause-tube default 10\s
c1 < BAD_FORMAT
c1 > pause-tube default 10 1
c1 < BAD_FORMAT
c1 > pause-tube default x
c1 < BAD_FORMAT
c1 > pause-tube default 4294967296
c1 < BAD_FORMAT
c1 > pause-tube\s
c1 < BAD_FORMAT
c1 > pause-tube
c1 < BAD_FORMAT
c1 > pause-tube !x 10
c1 < BAD_FORMAT
