# "reserved" matches the reserve prefix and is BAD_FORMAT, not an unknown command.
c1 > reserved
c1 < BAD_FORMAT
