# Any line starting with "quit" closes the connection.
c1 > quitter now
c1 eof
