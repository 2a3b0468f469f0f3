# A fresh server has only the default tube.
c1 > list-tubes
c1 < OK 14
| ---
| - default
