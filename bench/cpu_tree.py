"""CPU time of this process and everything it started, by role.

A Spark figure's wall time on a 2-core machine hides who spends it: this process (the
Spark driver, and the embedded server's threads when one runs here), the JVM it started,
and the JVM's Python workers. :func:`sample` reads ``utime + stime`` of every process
in the tree from ``/proc``; the difference of two samples says which part grew when a
writer replaces Spark's floor. Linux only; a process that exits between two samples
takes its time with it (Spark's workers are reused, so they stay).
"""

from __future__ import annotations

import os

#: Roles a process of the tree is counted under.
ROLES = ("driver", "jvm", "workers")

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, str, float] | None:
    """(parent pid, command name, CPU seconds) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), name, (int(fields[11]) + int(fields[12])) / _TICK


def sample(root: int | None = None) -> dict[str, float]:
    """CPU seconds so far of ``root`` (default: this process) and its descendants:
    ``driver`` is the root and children that are not the JVM, ``jvm`` the ``java``
    processes, ``workers`` whatever the JVM started."""
    root = os.getpid() if root is None else root
    children: dict[int, list[tuple[int, str, float]]] = {}
    own = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(entry)
        if st is None:
            continue
        parent, name, cpu = st
        if int(entry) == root:
            own = cpu
        children.setdefault(parent, []).append((int(entry), name, cpu))
    out = dict.fromkeys(ROLES, 0.0)
    out["driver"] = own
    todo = [(root, "driver")]
    while todo:
        pid, role = todo.pop()
        for kid, name, cpu in children.get(pid, []):
            kid_role = "jvm" if name == "java" else "workers" if role != "driver" else "driver"
            out[kid_role] += cpu
            todo.append((kid, kid_role))
    return out


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per role between two samples."""
    return {role: max(0.0, after[role] - before[role]) for role in ROLES}
