# reserve-job of an id that does not exist is NOT_FOUND.
c1 > reserve-job 1
c1 < NOT_FOUND
c1 > reserve-job 18446744073709551615
c1 < NOT_FOUND
