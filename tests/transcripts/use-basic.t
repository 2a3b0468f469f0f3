# use switches the tube that put, peek-* and kick work on, creating it.
c1 > use jobs
c1 < USING jobs
c1 > list-tube-used
c1 < USING jobs
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - jobs
