# A 226-byte line is too long: the first 224 bytes are dropped, the CRLF then ends the
# line, which is answered BAD_FORMAT; the next command is parsed normally.
c1 > {224*x}
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
