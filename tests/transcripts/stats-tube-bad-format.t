# stats-tube checks the name like use does.
c1 > stats-tube\s
c1 < BAD_FORMAT
c1 > stats-tube default\s
c1 < BAD_FORMAT
c1 > stats-tube -x
c1 < BAD_FORMAT
c1 > stats-tube {201*a}
c1 < BAD_FORMAT
c1 > stats-tube a!b
c1 < BAD_FORMAT
