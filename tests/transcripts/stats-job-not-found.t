# stats-job of an unknown id is NOT_FOUND.
c1 > stats-job 1
c1 < NOT_FOUND
c1 > stats-job 18446744073709551615
c1 < NOT_FOUND
