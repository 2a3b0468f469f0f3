"""The history checker of bench/cluster_chaos.py: pure functions over what clients saw.

A history (JSON lines, one object each; ``load`` reads them) holds, on one monotonic
clock in nanoseconds:

- ``{"t": "op", ...}``: one command on one client connection: ``cmd``, its invocation
  ``inv``, its completion ``ret`` and first reply word ``reply`` (both null when no
  reply came: a timeout or a lost connection, so it may or may not have happened),
  ``target`` (the body of the job the command names: a put's body, or the job an id
  was learned for on that connection), ``id``, the reply's ``body``, and the
  arguments that matter (``tube``, ``watch``, ``pri``, ``delay``, ``ttr``, ``count``
  for a kick's reply, ``state`` for stats-job's);
- ``{"t": "open", "conn", "client", "node", "at"}`` and ``{"t": "close", "conn", "at"}``
  (the client closes the socket at ``at``; the server may see it later, never earlier);
- ``{"t": "fault", "kind", "node", "at"}``: what the harness did to a node or its links;
  ``kill``, ``term``, ``power``, ``cut`` and ``oneway`` may end the node's connections
  at ``at`` (a one-way cut ends them when it heals; ``at`` is an earlier bound). In a
  cluster the harness also records what it saw of the leadership, with ``seen``, a
  later bound (bench/cluster_chaos_nodes.py): ``depose``, the node stopped serving
  clients itself; ``leader``, a node began to serve a term. Neither ends a
  connection or a reservation: every client connection of a cluster is a session
  whose reservations are replicated, a follower's (forwarded to the leader) as the
  leader's own (carried to the next leader when the leader's term ends), so a
  change of leader keeps them all. A ``cut`` or ``oneway`` of a node's links to some
  peers may also end the connections of those peers (their sessions lose their way
  to the leader, and end after the grace time). Such a fault concerns the
  connections opened by ``seen``;
- ``{"t": "end", "inv", "ret", "empty"}``: after the final drain a stats read at
  ``[inv, ret]`` saw no job left (``empty``).

Jobs are named by their body (each put's body is unique; ids are the server's).

What is checked, per job (``Verdict``, counts plus examples):

- **lost**: a put answered INSERTED, no delete of it answered DELETED or left without a
  reply, and the drain ended with the server empty (without a verified empty end,
  losses are not judged and ``problems`` says so).
- **resurrected**: a delete answered DELETED, then (invoked after that reply) the job
  reserved, found by a peek, shown by stats-job, touched, released, buried, kicked or
  deleted again.
- **duplicates**: a job RESERVED to connection B while, provably, connection A still
  held it: A's reserve replied before B's was invoked, and none of these could have
  come before B's reply: A's TTR deadline (A's reserve or a touch answered TOUCHED and
  replied before B's invocation, plus the TTR, less ``slack``), A's connection
  ending (its close or a fault that ends connections), a release/bury/delete by A.
- **unexpected**: a reply carrying a body no put sent, a body under an id other than
  its put's INSERTED id, a peek by id whose body is not the job the id named, or a
  reserve handing out a job of a tube the connection does not watch.
- **linearizability**: every job's steps are explained by one order (see
  bench/cluster_chaos_lin.py); ``undecided`` counts jobs whose search hit ``budget``.
- **timed_out**: a reserve answered TIMED_OUT while a job of a tube it watched was
  provably ready for its whole interval: made ready (put with no delay, release with
  no delay, kick-job) by a step that replied before the reserve's invocation and
  overlapped no other step that could change the job, with no such step, no reserve
  without reply on the node's watchers of that tube, and no fault ending connections
  on the node, invoked before the reserve's reply.

Not checked: priority order and FIFO among ready jobs, which of several waiting
reservers gets a job, DEADLINE_SOON timing, pauses, and the global effect of a bulk
``kick`` (it may kick any buried or delayed job of its tube within its interval, or
after its invocation if no reply came).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_chaos_lin import INF, NAME_STATES, Ghost, Step, Timing, search

ENDS_CONNS = frozenset({"kill", "term", "power", "cut", "oneway"})
_LINKS = frozenset({"cut", "oneway"})  # also end the connections of the peers they cut off
_DIES = frozenset({"kill", "term", "power"})  # the node's process ends
MAKES_READY = {"put": "INSERTED", "release": "RELEASED", "kick-job": "KICKED"}
# Replies that show the job existed when the step ran.
SEEN_ALIVE = {
    "reserve": "RESERVED",
    "peek": "FOUND",
    "peek-ready": "FOUND",
    "peek-delayed": "FOUND",
    "peek-buried": "FOUND",
    "stats-job": "OK",
    "touch": "TOUCHED",
    "release": "RELEASED",
    "bury": "BURIED",
    "kick-job": "KICKED",
    "delete": "DELETED",
}
RESERVES = ("reserve", "reserve-with-timeout", "reserve-job")
EXAMPLES = 5


@dataclass(frozen=True)
class Op:
    cmd: str
    conn: int
    inv: int
    ret: int | None = None
    reply: str | None = None
    target: str | None = None
    id: int | None = None
    body: str | None = None
    tube: str | None = None
    watch: tuple[str, ...] | None = None
    delay: int = 0
    ttr: int = 0
    count: int | None = None
    state: str | None = None
    client: str = ""

    @property
    def kind(self) -> str:
        return "reserve" if self.cmd in RESERVES else self.cmd

    @property
    def job(self) -> str | None:
        """The body of the job this op is about."""
        if self.kind in ("reserve",) or self.cmd.startswith("peek-"):
            return self.body if self.reply in ("RESERVED", "FOUND") else None
        return self.target

    @property
    def end(self) -> int:
        return INF if self.ret is None else self.ret

    def brief(self) -> str:
        ret = "?" if self.ret is None else f"{self.ret / 1e9:.3f}"
        reply = self.reply or "(no reply)"
        return f"{self.client}#{self.conn} {self.cmd} {reply} [{self.inv / 1e9:.3f},{ret}]"


@dataclass(frozen=True)
class Fault:
    kind: str
    node: int
    at: int
    seen: int  # it happened in [at, seen]; at for what the harness did itself
    peers: tuple[int, ...] = ()  # a link fault's other ends

    def ends(self, node: int) -> bool:
        """Whether it may end the connections to ``node``."""
        if self.kind in _LINKS and node in self.peers:
            return True
        return self.kind in ENDS_CONNS and self.node == node


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    opened: dict[int, tuple[int, int]] = field(default_factory=dict)  # conn -> (node, at)
    closed: dict[int, int] = field(default_factory=dict)  # conn -> at
    faults: list[Fault] = field(default_factory=list)
    end: tuple[int, int] | None = None  # (inv, ret) of the stats read that saw it empty

    def conn_end(self, conn: int) -> int:
        """Earliest moment the server could have dropped ``conn``."""
        end = self.closed.get(conn, INF)
        node, opened = self.opened.get(conn, (0, 0))
        for f in self.faults:
            if f.ends(node) and opened <= f.seen and f.at < end:
                end = min(end, max(f.at, opened))
        return end

    def node_of(self, conn: int) -> int:
        return self.opened.get(conn, (0, 0))[0]

    def ghost_until(self, o: Op) -> int:
        """When a reserve without reply stops being able to act: on a single node, when
        that node's process died after it; in a cluster never (another node may carry
        it out)."""
        if len({node for node, _ in self.opened.values()}) > 1:
            return INF
        node = self.node_of(o.conn)
        dead = [f.at for f in self.faults if f.kind in _DIES and f.node == node and f.at > o.inv]
        return min(dead, default=INF)


@dataclass
class Kind:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(text)


@dataclass
class Verdict:
    jobs: int = 0
    acknowledged: int = 0
    lost: Kind = field(default_factory=Kind)
    resurrected: Kind = field(default_factory=Kind)
    duplicates: Kind = field(default_factory=Kind)
    unexpected: Kind = field(default_factory=Kind)
    linearizability: Kind = field(default_factory=Kind)
    timed_out: Kind = field(default_factory=Kind)
    undecided: Kind = field(default_factory=Kind)
    problems: list[str] = field(default_factory=list)

    KINDS = ("lost", "resurrected", "duplicates", "unexpected", "linearizability", "timed_out")

    @property
    def violations(self) -> int:
        return sum(getattr(self, k).count for k in self.KINDS)

    @property
    def ok(self) -> bool:
        return self.violations == 0 and not self.problems

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k).count for k in (*self.KINDS, "undecided")}


def parse(records: Iterable[Mapping[str, Any]]) -> History:
    h = History()
    for r in records:
        t = r.get("t")
        if t == "op":
            watch = r.get("watch")
            fields = {k: r[k] for k in Op.__dataclass_fields__ if k in r and k != "watch"}
            h.ops.append(Op(**fields, watch=None if watch is None else tuple(watch)))
        elif t == "open":
            h.opened[r["conn"]] = (r.get("node", 0), r["at"])
        elif t == "close":
            h.closed[r["conn"]] = r["at"]
        elif t == "fault":
            peers = tuple(r.get("peers") or ())
            h.faults.append(
                Fault(r["kind"], r.get("node", 0), r["at"], r.get("seen", r["at"]), peers)
            )
        elif t == "end" and r.get("empty"):
            h.end = (r["inv"], r["ret"])
    return h


def load(path: Path) -> History:
    with path.open() as f:
        return parse(json.loads(line) for line in f if line.strip())


def _puts(h: History) -> dict[str, Op]:
    return {o.target: o for o in h.ops if o.cmd == "put" and o.target is not None}


def _check_bodies(h: History, puts: Mapping[str, Op], v: Verdict) -> None:
    for o in h.ops:
        if o.body is None or o.reply not in ("RESERVED", "FOUND"):
            continue
        put = puts.get(o.body)
        if put is None or put.reply not in (None, "INSERTED", "BURIED"):
            v.unexpected.add(f"{o.brief()}: body {o.body[:40]!r} was never put")
            continue
        if put.id is not None and o.id is not None and put.reply is not None and o.id != put.id:
            v.unexpected.add(f"{o.brief()}: job {o.body!r} as id {o.id}, put as id {put.id}")
        if o.cmd == "peek" and o.target is not None and o.body != o.target:
            v.unexpected.add(f"{o.brief()}: id {o.id} named {o.target!r}, found {o.body!r}")
        if o.kind == "reserve" and o.watch is not None and put.tube not in o.watch:
            v.unexpected.add(f"{o.brief()}: job of tube {put.tube} to a watcher of {o.watch}")


def _check_lost(
    h: History, puts: Mapping[str, Op], by_job: Mapping[str, list[Op]], v: Verdict
) -> None:
    if h.end is None:
        v.problems.append("the drain did not end with an empty server: losses not judged")
        return
    for body, put in puts.items():
        if put.reply != "INSERTED":
            continue
        deleted = any(
            o.cmd == "delete" and o.reply in ("DELETED", None) for o in by_job.get(body, ())
        )
        if not deleted:
            v.lost.add(f"{put.brief()} id {put.id}: {body!r} never deleted, not left at the end")


def _check_resurrected(body: str, ops: list[Op], v: Verdict) -> None:
    deletes = [o for o in ops if o.cmd == "delete" and o.reply == "DELETED"]
    if not deletes:
        return
    first = min(deletes, key=lambda o: o.end)
    for o in ops:
        if o is not first and o.inv > first.end and SEEN_ALIVE.get(o.kind) == o.reply:
            v.resurrected.add(f"{body!r}: deleted by {first.brief()}, then {o.brief()}")
            return


def _check_duplicates(
    h: History, body: str, ops: list[Op], ttr_ns: int, slack: int, v: Verdict
) -> None:
    reserved = [o for o in ops if o.kind == "reserve" and o.reply == "RESERVED"]
    for a in reserved:
        for b in reserved:
            if a is b or a.end >= b.inv:
                continue
            assert b.ret is not None
            held = a.inv + ttr_ns - slack
            ends = h.conn_end(a.conn)
            for o in ops:
                if o.conn != a.conn or o.inv <= a.inv:
                    continue
                if o.cmd == "touch" and o.reply == "TOUCHED" and o.end < b.inv:
                    held = max(held, o.inv + ttr_ns - slack)
                if o.cmd in ("release", "bury", "delete"):
                    ends = min(ends, o.inv)
            if min(held, ends) >= b.ret:
                v.duplicates.add(
                    f"{body!r}: {a.brief()} held it (until >= {min(held, ends) / 1e9:.3f}) "
                    f"when {b.brief()}"
                )
                return


def _steps(h: History, ops: list[Op], put: Op | None) -> list[Step]:
    steps = []
    for o in ops:
        if o.kind == "reserve" and o.reply is None:
            continue  # a ghost
        if o.reply is None and (o.cmd.startswith("peek") or o.cmd == "stats-job"):
            continue  # a read without a reply says nothing
        if o.cmd.startswith("peek-") and o.reply != "FOUND":
            continue
        if o.reply is not None and o.reply not in _ANSWERS.get(o.kind, ()):
            continue  # an error reply: nothing happened
        state = NAME_STATES.get(o.state or "", -1)
        delay = o.delay * 1_000_000_000
        kind = "reserve-job" if o.cmd == "reserve-job" else o.kind
        steps.append(Step(kind, o.reply, o.conn, o.inv, o.end, delay, state, o.brief()))
    if h.end is not None and put is not None:
        steps.append(Step("gone", "GONE", -1, h.end[0], h.end[1], label="end: server empty"))
    return steps


_ANSWERS = {
    "put": ("INSERTED", "BURIED"),
    "reserve": ("RESERVED",),
    "delete": ("DELETED", "NOT_FOUND"),
    "release": ("RELEASED", "BURIED", "NOT_FOUND"),
    "bury": ("BURIED", "NOT_FOUND"),
    "touch": ("TOUCHED", "NOT_FOUND"),
    "kick-job": ("KICKED", "NOT_FOUND"),
    "kick": ("KICKED",),
    "peek": ("FOUND", "NOT_FOUND"),
    "peek-ready": ("FOUND",),
    "peek-delayed": ("FOUND",),
    "peek-buried": ("FOUND",),
    "stats-job": ("OK", "NOT_FOUND"),
}


def _ghosts(h: History) -> list[Op]:
    """Reserves with no reply."""
    return [o for o in h.ops if o.kind == "reserve" and o.reply is None]


def _could_take(g: Op, body: str, tube: str | None) -> bool:
    """Whether reserve ``g`` could have reserved the job ``body`` of ``tube``."""
    if g.cmd == "reserve-job":
        return g.target == body
    return g.watch is not None and tube in g.watch


def _kicks(h: History) -> dict[str, list[Op]]:
    """Per tube, the bulk kicks that may have kicked something: those that said so,
    and those without a reply."""
    out: dict[str, list[Op]] = defaultdict(list)
    for o in h.ops:
        if o.cmd != "kick" or not o.tube:
            continue
        if o.reply is None or (o.reply == "KICKED" and (o.count or 0) > 0):
            out[o.tube].append(o)
    return out


def _check_timed_out(
    h: History, puts: Mapping[str, Op], by_job: Mapping[str, list[Op]], v: Verdict
) -> None:
    timeouts = [o for o in h.ops if o.kind == "reserve" and o.reply == "TIMED_OUT" and o.watch]
    if not timeouts:
        return
    ghosts = _ghosts(h)
    ready: list[tuple[str, str, int, int, int]] = []  # (body, tube, node, from, until)
    for body, ops in by_job.items():
        put = puts.get(body)
        if put is None or put.tube is None:
            continue
        node = h.node_of(put.conn)
        changes = [o for o in ops if _may_change(o)]
        for m in changes:
            if MAKES_READY.get(m.kind) != m.reply or m.delay or m.ret is None:
                continue
            if any(o is not m and o.inv < m.ret and o.end > m.inv for o in changes):
                continue
            until = min((o.inv for o in changes if o.inv >= m.ret), default=INF)
            for g in ghosts:
                if _could_take(g, body, put.tube) and h.ghost_until(g) > m.ret:
                    until = min(until, max(g.inv, m.ret))
            for f in h.faults:
                if f.ends(node) and f.seen >= m.inv:
                    until = min(until, max(f.at, m.inv))
            if until > m.ret:
                ready.append((body, put.tube, node, m.ret, until))
    for o in timeouts:
        node = h.node_of(o.conn)
        assert o.watch is not None and o.ret is not None
        for body, tube, jnode, start, until in ready:
            if jnode == node and tube in o.watch and start < o.inv and o.ret < until:
                v.timed_out.add(f"{o.brief()} watching {o.watch}: {body!r} ready throughout")
                break


def _may_change(o: Op) -> bool:
    if o.kind in ("peek", "stats-job", "kick") or o.cmd.startswith("peek-"):
        return False
    if o.reply == "NOT_FOUND":
        return False
    return o.reply is None or o.reply in _ANSWERS.get(o.kind, ())


def check(h: History, slack_ns: int = 50_000_000, budget: int = 200_000) -> Verdict:
    v = Verdict()
    puts = _puts(h)
    by_job: dict[str, list[Op]] = defaultdict(list)
    for o in h.ops:
        job = o.job
        if job is not None:
            by_job[job].append(o)
    v.jobs = len(by_job)
    v.acknowledged = sum(1 for p in puts.values() if p.reply == "INSERTED")
    _check_bodies(h, puts, v)
    _check_lost(h, puts, by_job, v)
    ghosts = _ghosts(h)
    until = {g: h.ghost_until(g) for g in ghosts}
    ends = {c: h.conn_end(c) for c in h.opened}

    def conn_end(conn: int) -> int:
        return ends[conn] if conn in ends else h.conn_end(conn)

    kicks = _kicks(h)
    for body, ops in by_job.items():
        put = puts.get(body)
        if put is None or put.reply not in (None, "INSERTED", "BURIED"):
            continue  # reported as unexpected
        ttr_ns = max(put.ttr, 1) * 1_000_000_000
        _check_resurrected(body, ops, v)
        _check_duplicates(h, body, ops, ttr_ns, slack_ns, v)
        steps = _steps(h, ops, put)
        # A bulk kick may have kicked the job if it overlaps the job's life: after its
        # put was invoked, before the last reply about it (a kick changes nothing
        # that a later "gone" could tell).
        last = max((s.ret for s in steps if s.kind != "gone" and s.ret < INF), default=INF)
        n_kicks = 0
        for k in kicks.get(put.tube or "", ()):
            if k.end > put.inv and k.inv < last:
                steps.append(Step("kick", "KICKED", k.conn, k.inv, k.end, label=k.brief()))
                n_kicks += 1
        mine = [Ghost(g.conn, g.inv, until[g]) for g in ghosts if _could_take(g, body, put.tube)]
        mine = [g for g in mine if g.until > put.inv]
        timing = Timing(ttr_ns, slack_ns, conn_end)
        result = search(steps, mine, timing, budget)
        if result == "violation":
            shown = [s.label for s in sorted(steps, key=lambda s: s.inv) if s.kind != "kick"]
            kicked = f" (and {n_kicks} bulk kicks of its tube)" if n_kicks else ""
            v.linearizability.add(f"{body!r}{kicked}: " + "; ".join(shown))
        elif result == "undecided":
            v.undecided.add(f"{body!r}: {len(steps)} steps, {len(mine)} reserves without reply")
    _check_timed_out(h, puts, by_job, v)
    return v


def report(v: Verdict) -> str:
    lines = [f"jobs {v.jobs}, acknowledged puts {v.acknowledged}"]
    for name in (*Verdict.KINDS, "undecided"):
        kind: Kind = getattr(v, name)
        lines.append(f"  {name}: {kind.count}")
        lines.extend(f"    e.g. {e}" for e in kind.examples)
    lines.extend(f"  problem: {p}" for p in v.problems)
    return "\n".join(lines)
