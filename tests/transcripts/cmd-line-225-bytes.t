# A 225-byte line is too long, and its CR is the 224th byte, just outside what the
# server scans for a line end in its 224-byte buffer. The buffer is thrown away with
# the CR in it, the lone LF that follows ends nothing, and the discarding goes on up
# to the NEXT CRLF: the following command is swallowed into the BAD_FORMAT.
c1 > reserve-with-timeout {201*0}\s
c1 silent 150
c1 > list-tube-used
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
