# A new connection uses default.
c1 > list-tube-used
c1 < USING default
