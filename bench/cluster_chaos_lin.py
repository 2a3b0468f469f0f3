"""Per-job linearizability for bench/cluster_chaos_check.py: the job state machine and
a bounded search for one sequential order of a job's operations.

A job is ABSENT (not put yet), READY, DELAYED, RESERVED by a connection, BURIED or
DELETED. Each operation a client saw (``Step``) has an interval ``[inv, ret]`` on one
monotonic clock (``ret`` is None when no reply came: the operation may or may not have
taken effect, and is *optional*). The search looks for an order of the required
steps, plus any subset of the optional ones, such that each step's point ``p`` can be
chosen in its interval with points never going back (``p`` = max(latest point so far,
inv), which is feasible iff ``p <= ret``), and each step is valid in the state the
previous ones left. That is Wing & Gong's search with memoised states (Lowe's
improvement), on one job at a time, which is what keeps it small.

Time moves a job by itself, and the search allows (never requires) it, just before a
step, from a lower bound on:

- DELAYED -> READY: the point of the put/release that delayed it plus the delay;
- RESERVED -> READY: the earlier of the reservation's TTR deadline (its reserve's or
  last touch's point plus the TTR) and the earliest moment the holder's connection
  could have ended on the server (its close, or a fault that ends connections).

Both bounds are less ``slack`` (clock rounding on the server). A reserve with no reply
(a "ghost") may have reserved any ready job of its tubes at any point after its
invocation, for a connection that is then closed; it is tried only just before a step
that needs the job reserved by someone else (a delete answered NOT_FOUND, a stats-job
saying ``reserved``), which loses no order: anywhere else a ghost's reservation can be
moved later or left out without changing any step's validity.

``search`` answers "ok", "violation" or "undecided" (more than ``budget`` states).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

INF = 1 << 62

ABSENT, READY, DELAYED, RESERVED, BURIED, DELETED = range(6)
STATE_NAMES = ("absent", "ready", "delayed", "reserved", "buried", "deleted")
NAME_STATES = {name: i for i, name in enumerate(STATE_NAMES)}

# (status, holder connection or -1, lower bound of the moment time may move it, in ns)
State = tuple[int, int, int]
START: State = (ABSENT, -1, 0)


@dataclass(frozen=True)
class Step:
    """One operation on one job, as the search needs it."""

    kind: str  # put, reserve, reserve-job, delete, release, bury, touch, kick-job, kick, peek,
    #            peek-ready, peek-delayed, peek-buried, stats-job, gone
    reply: str | None  # first word of the reply; None: no reply (optional step)
    conn: int
    inv: int
    ret: int  # INF when no reply
    delay_ns: int = 0  # put / release
    state: int = -1  # stats-job's state
    label: str = ""  # for reports

    @property
    def required(self) -> bool:
        return self.reply is not None and self.kind != "kick"


@dataclass(frozen=True)
class Ghost:
    """A reserve with no reply that may have taken the job."""

    conn: int
    inv: int
    until: int = INF  # after this it cannot act (its server process died)


@dataclass(frozen=True)
class Timing:
    """What the job's state machine needs to know besides the steps."""

    ttr_ns: int
    slack_ns: int
    conn_end: Callable[[int], int]  # earliest moment a connection could have ended

    def held_until(self, conn: int, point: int) -> int:
        """Lower bound of when a reservation made or touched at ``point`` may end."""
        return max(point, min(point + self.ttr_ns - self.slack_ns, self.conn_end(conn)))


def apply(step: Step, s: State, p: int, t: Timing) -> State | None:
    """The state after ``step`` at point ``p`` from ``s``, or None if it is not valid."""
    st, holder, _ = s
    mine = st == RESERVED and holder == step.conn
    k, r = step.kind, step.reply
    optional = r is None
    if k == "put":
        if st != ABSENT:
            return None
        if r == "BURIED":
            return (BURIED, -1, 0)
        if step.delay_ns > 0:
            return (DELAYED, -1, p + step.delay_ns - t.slack_ns)
        return (READY, -1, 0)
    if k == "reserve":
        return (RESERVED, step.conn, t.held_until(step.conn, p)) if st == READY else None
    if k == "reserve-job":
        ok = st in (READY, DELAYED, BURIED)
        return (RESERVED, step.conn, t.held_until(step.conn, p)) if ok else None
    if k == "delete":
        if r == "NOT_FOUND":
            return s if st in (ABSENT, DELETED) or (st == RESERVED and not mine) else None
        if st in (READY, DELAYED, BURIED) or mine:
            return (DELETED, -1, 0)
        return None
    if k in ("release", "bury", "touch"):
        if r == "NOT_FOUND":
            return None if mine else s
        if not mine:
            return None
        if k == "bury" or r == "BURIED":
            return (BURIED, -1, 0)
        if k == "touch":
            return (RESERVED, holder, t.held_until(holder, p))
        if step.delay_ns > 0:
            return (DELAYED, -1, p + step.delay_ns - t.slack_ns)
        return (READY, -1, 0)
    if k in ("kick-job", "kick"):
        if r == "NOT_FOUND":
            return None if st in (BURIED, DELAYED) else s
        return (READY, -1, 0) if st in (BURIED, DELAYED) else None
    if optional:
        return None  # reads without a reply say nothing
    if k == "peek":
        exists = st not in (ABSENT, DELETED)
        return s if exists == (r == "FOUND") else None
    if k in ("peek-ready", "peek-delayed", "peek-buried"):
        want = NAME_STATES[k.removeprefix("peek-")]
        return s if st == want else None
    if k == "stats-job":
        if r == "NOT_FOUND":
            return s if st in (ABSENT, DELETED) else None
        return s if st == step.state else None
    if k == "gone":
        return s if st in (ABSENT, DELETED) else None
    raise ValueError(f"unknown step kind {k!r}")


def _needs_other_holder(step: Step) -> bool:
    """True for the steps that only a reservation by another connection explains."""
    if step.kind == "delete":
        return step.reply == "NOT_FOUND"
    return step.kind == "stats-job" and step.state == RESERVED


def _before(
    step: Step, s: State, tlow: int, used: int, ghosts: Sequence[Ghost], t: Timing
) -> list[tuple[State, int, int]]:
    """The states ``step`` may meet: as is, after time moved the job, after a ghost
    took it; each with the point reached and the ghosts used."""
    out = [(s, tlow, used)]
    if s[0] in (DELAYED, RESERVED) and max(tlow, s[2]) <= step.ret:
        out.append(((READY, -1, 0), max(tlow, s[2]), used))
    if _needs_other_holder(step):
        for state, low, u in list(out):
            if state[0] != READY:
                continue
            for i, g in enumerate(ghosts):
                pg = max(low, g.inv)
                if u >> i & 1 or g.conn == step.conn or pg > min(step.ret, g.until):
                    continue
                out.append(((RESERVED, g.conn, t.held_until(g.conn, pg)), pg, u | 1 << i))
    return out


def search(steps: Sequence[Step], ghosts: Sequence[Ghost], t: Timing, budget: int) -> str:
    """ "ok" if some order explains ``steps``, "violation" if none does, "undecided"
    when more than ``budget`` states were visited."""
    steps = sorted(steps, key=lambda s: (s.inv, s.ret))
    n = len(steps)
    required = 0
    for i, step in enumerate(steps):
        if step.required:
            required |= 1 << i
    seen: set[tuple[int, State, int, int]] = set()
    stack: list[tuple[int, State, int, int]] = [(0, START, 0, 0)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if len(seen) > budget:
            return "undecided"
        done, s, tlow, used = node
        if done & required == required:
            return "ok"
        # The two earliest replies among the required steps not placed yet: no step
        # invoked after the earliest of them can come before it.
        first = second = INF
        for i in range(n):
            if required >> i & 1 and not done >> i & 1:
                r = steps[i].ret
                if r < first:
                    first, second = r, first
                elif r < second:
                    second = r
        if first < tlow:
            continue
        for i in range(n):
            if done >> i & 1:
                continue
            step = steps[i]
            bound = second if (required >> i & 1 and step.ret == first) else first
            if step.inv > bound:
                break  # sorted by inv: no later step can come next either
            for pre, low, u in _before(step, s, tlow, used, ghosts, t):
                p = max(low, step.inv)
                if p > step.ret:
                    continue
                nxt = apply(step, pre, p, t)
                if nxt is None or (not step.required and nxt == pre):
                    continue
                stack.append((done | 1 << i, nxt, p, u))
    return "violation"
