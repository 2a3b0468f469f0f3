# A job whose body is still arriving does not exist yet: peek and stats-job of its
# id answer NOT_FOUND. Its id is taken, though: the job has it once the body is in.
%skip beanstalkd beanstalkd shows the unfinished job (state invalid, its body padded with whatever its memory held); README, differences
c1 >> put 0 0 60 10\r\nabc
c1 silent 100
c2 > peek 1
c2 < NOT_FOUND
c2 > stats-job 1
c2 < NOT_FOUND
c1 >> defghij\r\n
c1 < INSERTED 1
c2 > peek 1
c2 < FOUND 1 10
c2 < abcdefghij
