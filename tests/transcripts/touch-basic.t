# touch answers TOUCHED for a job this connection reserved.
c1 > put 0 0 10 1
c1 > a
c1 < INSERTED 1
c1 > reserve
c1 < RESERVED 1 1
c1 < a
c1 > touch 1
c1 < TOUCHED
