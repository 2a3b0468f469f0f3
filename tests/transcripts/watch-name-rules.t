# watch checks names like use: 200 bytes fine, 201 or bad bytes or spaces BAD_FORMAT.
c1 > watch {200*w}
c1 < WATCHING 2
c1 > watch {201*w}
c1 < BAD_FORMAT
c1 > watch -w
c1 < BAD_FORMAT
c1 > watch w\s
c1 < BAD_FORMAT
c1 > watch w!
c1 < BAD_FORMAT
c1 > watch\s
c1 < BAD_FORMAT
c1 > watch
c1 < UNKNOWN_COMMAND
