# A client closes its socket while its reserve waits behind more input than the
# server reads ahead: TIMED_OUT is written, the first queued put (whose body is
# still queued) is applied and its reply's write fails, so the second put never is.
%max-job-size 100000
c1 >> reserve\r\nput 0 0 60 100000\r\n{100000*a}\r\nput 0 0 60 1\r\nb\r\n
c1 silent 150
c1 close
c2 silent 200
c2 > delete 1
c2 < DELETED
c2 > peek 2
c2 < NOT_FOUND
