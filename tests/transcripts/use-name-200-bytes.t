# A tube name of 200 bytes is the longest allowed.
c1 > use {200*a}
c1 < USING {200*a}
