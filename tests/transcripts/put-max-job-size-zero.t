%max-job-size 0
# With a maximum job size of 0, only empty bodies are accepted.
c1 > put 0 0 10 0
c1 >
c1 < INSERTED 1
c1 > put 0 0 10 1
c1 > a
c1 < JOB_TOO_BIG
