# put answers INSERTED with the new job's id; the body comes back unchanged.
c1 > put 0 0 10 5
c1 > hello
c1 < INSERTED 1
c1 > peek 1
c1 < FOUND 1 5
c1 < hello
