# The half-close is noticed while more input is queued behind the waiting reserve
# than the server reads ahead (beanstalkd reads none of it): TIMED_OUT, then the
# queued put is read and answered, then the server closes.
%max-job-size 100000
c1 >> reserve\r\nput 0 0 60 100000\r\n{100000*a}\r\n
c1 silent 150
c1 shutdown
c1 < TIMED_OUT
c1 < INSERTED 1
c1 eof
