# When a tube is dropped, the last tube of the list moves into its slot (beanstalkd's
# set removes by swapping with the last element): default a b c, drop a: default c b.
c1 > use a
c1 < USING a
c2 > use b
c2 < USING b
c3 > use c
c3 < USING c
c1 > use default
c1 < USING default
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - c
| - b
