# Commands whose name ends with a space in the table are unknown without the space.
c1 >> use\r\nwatch\r\nignore\r\ndelete\r\nrelease\r\nbury\r\ntouch\r\nkick\r\npeek\r\nput\r\n
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
c1 < UNKNOWN_COMMAND
