# list-tubes lists tubes in the order they were created.
c1 > use zeta
c1 < USING zeta
c1 > watch alpha
c1 < WATCHING 2
c1 > watch mid
c1 < WATCHING 3
c1 > list-tubes
c1 < OK {len}
| ---
| - default
| - zeta
| - alpha
| - mid
