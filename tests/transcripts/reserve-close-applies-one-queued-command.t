# A client closes its socket while its reserve waits, with two puts queued behind
# it: TIMED_OUT is written (the client's side answers it with a reset), the first
# put is applied and its reply's write fails, so the second put never is.
c1 >> reserve\r\nput 0 0 60 1\r\na\r\nput 0 0 60 1\r\nb\r\n
c1 silent 100
c1 close
c2 silent 200
c2 > peek-ready
c2 < FOUND 1 1
c2 < a
c2 > peek 2
c2 < NOT_FOUND
