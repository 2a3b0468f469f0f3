# Extra spaces before the name and before the delay are accepted.
c1 > pause-tube   default   5
c1 < PAUSED
