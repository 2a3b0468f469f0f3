# Numbers are decimal: "0x10" reads as 0 followed by junk, which is BAD_FORMAT.
c1 > put 0x10 0 10 1
c1 < BAD_FORMAT
