# After a too-long line, the rest of that line is dropped and the next line is parsed,
# also when both come in one send.
c1 >> {300*x}\r\nlist-tube-used\r\n
c1 < BAD_FORMAT
c1 < USING default
