# Only the first CR of the buffer is looked at: when it is not followed by LF the line
# is taken as unfinished, later CRLFs are ignored, and nothing is answered until the
# 224-byte buffer overflows; then BAD_FORMAT ends at the next CRLF. Here 9 + 16 + 202
# bytes: the overflow comes inside the x's, and the BAD_FORMAT at their CRLF.
c1 > use a\rb
c1 silent 150
c1 > list-tube-used
c1 silent 150
c1 > {200*x}
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
