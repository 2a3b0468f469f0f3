# Ids are 64-bit: 2^64-1 is a valid (unknown) id, 2^64 is BAD_FORMAT.
c1 > delete 18446744073709551615
c1 < NOT_FOUND
c1 > delete 18446744073709551616
c1 < BAD_FORMAT
