%skip beanstalkd beanstalkd (1.12, and 1.13 has the same code) sometimes leaves a job whose holder stays silent reserved past its TTR until the holder sends something: its timer re-checks deadline >= now at microsecond resolution and on a tie drops the holder from its timer heap
# A job handed to a reserve that was waiting is released at its ttr too, while the
# holder stays silent.
c1 > reserve
c1 silent 100
c2 > put 0 0 1 1
c2 > a
c2 < INSERTED 1
c1 < RESERVED 1 1
c1 < a
c3 > reserve-with-timeout 3
c3 silent 500
c3 < RESERVED 1 1
c3 < a
