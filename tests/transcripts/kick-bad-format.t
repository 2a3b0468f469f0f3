# kick needs a number right after the space (leading spaces are fine).
c1 > kick abc
c1 < BAD_FORMAT
c1 > kick\s
c1 < BAD_FORMAT
c1 > kick    3
c1 < KICKED 0
