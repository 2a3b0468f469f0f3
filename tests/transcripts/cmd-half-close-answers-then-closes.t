# A command followed by a half-close is still answered; then the server closes.
c1 > list-tube-used
c1 shutdown
c1 < USING default
c1 eof
