# A body not followed by CRLF: EXPECTED_CRLF once size+2 bytes have arrived; the bytes
# after them are parsed as the next command.
c1 >> put 0 0 10 3\r\nabcde
c1 < EXPECTED_CRLF
c1 > peek 1
c1 < NOT_FOUND
