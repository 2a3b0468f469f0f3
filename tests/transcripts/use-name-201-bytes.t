# A tube name of 201 bytes is BAD_FORMAT.
c1 > use {201*a}
c1 < BAD_FORMAT
c1 > list-tube-used
c1 < USING default
