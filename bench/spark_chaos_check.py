"""The total-queue checker of bench/spark_chaos.py: pure functions over what a run recorded.

Every job a producer put has a unique body (``body_for(seq)``), so a body names its job
across servers, restarts and reused ids. The checker is given:

- every put and its reply (``Put``: acknowledged with an id, refused, or no reply), with
  the server and the server's incarnation (the harness counts restarts);
- every row of the Parquet table (``Row``), final batch directories only: a batch
  written again by a replay replaces its earlier rows, as an idempotent sink means;
- the jobs another consumer took (``Taken``: the rival worker of the TTR cycles);
- the progress records of every micro-batch (``Progress``: the source's endOffset);
- the jobs still in a server at the end, the incarnations whose jobs died with a
  restart without a log, the moment each batch was planned, and the jobs of committed
  batches found still in a server right after a clean end (``Left``).

and returns a ``Verdict``:

- **lost**: acknowledged puts whose body is neither delivered (table or rival) nor in
  a server. On a server that keeps its jobs (``-b DIR -f 0``) that is a delete of a job
  the query never delivered (a delete by a reused id shows here; ``lost_reused_id``
  counts those whose server and id a batch of an earlier incarnation named). Jobs of an
  incarnation that died without a log are counted apart (``lost_with_server``).
- **unexpected**: rows whose body no producer put, rows whose server or id is not
  what the body's put was given, rows of a refused put, and rows read by a batch
  planned before their job was put (a replay that took another job under a reused id).
- **repeats**: a body delivered more than once (in two batches, twice in one, or by
  the query and the rival), each extra copy attributed to the cause of the run it
  appeared in; plus jobs a clean end left in a server after their batch was committed
  (they are delivered again by the next reader of the tube).

Violations: any lost or unexpected; any repeat after a clean stop, a clean
availableNow run or under a slow sink (a reader that touches its jobs at half their
smallest TTR lets none run out); after a SIGKILL or a server restart, repeats not
covered by the growth of the progress counters in that cycle (uncounted) or more than
two micro-batches' worth (unbounded).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Fault kinds of a cycle, and the cause a repeat is put down to.
CAUSES = {
    "clean_stop": "clean stop",
    "available_now": "clean availableNow",
    "driver_kill": "driver SIGKILL",
    "a_term": "server restart -b (SIGTERM)",
    "a_kill": "server restart -b (SIGKILL)",
    "b_restart": "server restart without -b",
    "ttr": "TTR expiry",
}
FAULTS = tuple(CAUSES)
# Causes after which no job may be delivered twice.
MUST_BE_ZERO = ("clean stop", "clean availableNow", "TTR expiry")
# Seconds of slack between a file's mtime and time.time() (the kernel's coarse clock).
CLOCK_SLACK = 0.05

_SEQ = re.compile(rb"^job-(\d+)-")


def body_for(seq: int) -> bytes:
    """Job ``seq``'s body: unique, of a length that varies with ``seq`` (11 to 260 bytes)."""
    pad = hashlib.blake2b(seq.to_bytes(8, "little"), digest_size=16).hexdigest().encode()
    n = (seq * 7919) % 240
    return b"job-%d-" % seq + (pad * (n // len(pad) + 1))[:n]


def seq_of(body: bytes) -> int | None:
    """The sequence number a body was made from, or None if no producer made it."""
    m = _SEQ.match(body)
    if m is None:
        return None
    seq = int(m.group(1))
    return seq if body_for(seq) == body else None


@dataclass(frozen=True)
class Put:
    seq: int
    server: str
    incarnation: int
    status: str  # "ok" (acknowledged, id set), "refused" (an error reply), "unknown" (no reply)
    id: int | None
    ttr: int
    cycle: int
    sent: float  # time.time() when the command went out


@dataclass(frozen=True)
class Row:
    batch: int
    server: str
    id: int
    body: bytes
    cycle: int
    phase: str  # "main" (the cycle's query, before and during its fault) or "settle"


@dataclass(frozen=True)
class Taken:
    """A job the rival worker reserved and deleted."""

    body: bytes
    cycle: int


@dataclass(frozen=True)
class Progress:
    cycle: int
    phase: str
    batch: int
    end_offset: Mapping[str, Any]


@dataclass(frozen=True)
class Left:
    """A job of a committed batch found in a server right after a clean end."""

    cycle: int
    cause: str
    body: bytes


@dataclass
class History:
    puts: list[Put]
    rows: list[Row]
    faults: dict[int, str]  # cycle -> fault kind (a key of CAUSES)
    in_server: set[bytes] = field(default_factory=set)
    lossy: set[tuple[str, int]] = field(default_factory=set)  # (server, incarnation)
    taken: list[Taken] = field(default_factory=list)
    progress: list[Progress] = field(default_factory=list)
    planned: dict[int, float] = field(default_factory=dict)  # batch -> time planned
    left: list[Left] = field(default_factory=list)
    max_rows: int = 100


@dataclass
class Verdict:
    acknowledged: int = 0
    delivered: int = 0
    lost: list[Put] = field(default_factory=list)
    lost_reused_id: int = 0
    lost_with_server: int = 0
    unexpected: list[str] = field(default_factory=list)
    repeats: Counter[str] = field(default_factory=Counter)  # cause -> extra copies
    left: Counter[str] = field(default_factory=Counter)  # cause -> jobs left after a clean end
    counted: dict[str, Counter[str]] = field(default_factory=dict)  # cause -> counter growth
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def cause_of(faults: Mapping[int, str], cycle: int, phase: str) -> str:
    """What a copy delivered in this cycle and phase is put down to.

    The settle run follows the cycle's fault; the main run follows the previous
    cycle's settle (a clean availableNow run), except under a slow sink, which is
    the fault of a TTR cycle's main run."""
    fault = faults.get(cycle, "available_now")
    if phase == "settle" or fault == "ttr":
        return CAUSES[fault]
    return CAUSES["available_now"]


def counter_growth(progress: Iterable[Progress]) -> dict[int, Counter[str]]:
    """Per cycle, how much each whole-number counter of the endOffset grew (the
    counters are running totals of the checkpoint; ``batch`` is not a counter)."""
    best: Counter[str] = Counter()
    growth: dict[int, Counter[str]] = {}
    by_cycle: dict[int, list[Progress]] = defaultdict(list)
    for p in progress:
        by_cycle[p.cycle].append(p)
    for cycle in sorted(by_cycle):
        before = Counter(best)
        for p in by_cycle[cycle]:
            for name, value in p.end_offset.items():
                if name != "batch" and isinstance(value, int) and not isinstance(value, bool):
                    best[name] = max(best[name], value)
        growth[cycle] = Counter({k: best[k] - before[k] for k in best if best[k] > before[k]})
    return growth


def _named_ids(progress: Iterable[Progress]) -> set[tuple[str, int]]:
    """(server, id) of every job some batch's endOffset named."""
    named: set[tuple[str, int]] = set()
    for p in progress:
        jobs = p.end_offset.get("jobs") or {}
        for server, tubes in dict(jobs).items():
            for text in dict(tubes).values():
                for part in str(text).split(","):
                    first, sep, last = part.partition("-")
                    if not first.isdigit():
                        continue
                    end = int(last) if sep and last.isdigit() else int(first)
                    named.update((server, i) for i in range(int(first), end + 1))
    return named


def _check_rows(h: History, by_seq: Mapping[int, Put], v: Verdict) -> None:
    for r in h.rows:
        seq = seq_of(r.body)
        put = by_seq.get(seq) if seq is not None else None
        if put is None:
            v.unexpected.append(
                f"batch {r.batch}: row {r.server} id {r.id}: no producer put body {r.body[:24]!r}"
            )
            continue
        if put.status == "refused":
            v.unexpected.append(f"batch {r.batch}: job {seq}, whose put was refused, was read")
        if r.server != put.server or (put.id is not None and r.id != put.id):
            v.unexpected.append(
                f"batch {r.batch}: job {seq} read as {r.server} id {r.id}; it was put to "
                f"{put.server} as id {put.id}"
            )
        planned = h.planned.get(r.batch)
        if planned is not None and put.sent > planned + CLOCK_SLACK:
            v.unexpected.append(
                f"batch {r.batch}: job {seq} ({r.server} id {r.id}) was put "
                f"{put.sent - planned:.2f}s after the batch was planned (a replay took "
                "another job under a reused id)"
            )


def _repeats(h: History, v: Verdict) -> dict[tuple[int, str], int]:
    """Fill v.repeats; extra copies per (cycle, cause), for the counted/bounded checks."""
    # body -> (cycle, batch, phase) of each copy
    seen: dict[bytes, list[tuple[int, int, str]]] = defaultdict(list)
    for r in h.rows:
        seen[r.body].append((r.cycle, r.batch, r.phase))
    for t in h.taken:
        seen[t.body].append((t.cycle, 1 << 62, "main"))
    per_cycle: Counter[tuple[int, str]] = Counter()
    for copies in seen.values():
        for cycle, _, phase in sorted(copies)[1:]:
            cause = cause_of(h.faults, cycle, phase)
            v.repeats[cause] += 1
            per_cycle[(cycle, cause)] += 1
    return dict(per_cycle)


def check(h: History) -> Verdict:
    v = Verdict()
    by_seq = {p.seq: p for p in h.puts}
    delivered = {r.body for r in h.rows} | {t.body for t in h.taken}
    v.delivered = len(delivered)
    _check_rows(h, by_seq, v)

    named = _named_ids(h.progress)
    for p in h.puts:
        if p.status != "ok":
            continue
        v.acknowledged += 1
        body = body_for(p.seq)
        if body in delivered or body in h.in_server:
            continue
        if (p.server, p.incarnation) in h.lossy:
            v.lost_with_server += 1
            continue
        v.lost.append(p)
        earlier = any((p.server, i) in h.lossy for i in range(p.incarnation))
        if earlier and p.id is not None and (p.server, p.id) in named:
            v.lost_reused_id += 1

    per_cycle = _repeats(h, v)
    for left in h.left:
        v.left[left.cause] += 1
    growth = counter_growth(h.progress)
    for cycle, grew in growth.items():
        cause = CAUSES[h.faults.get(cycle, "available_now")]
        v.counted.setdefault(cause, Counter()).update(grew)

    if v.lost:
        v.violations.append(
            f"lost: {len(v.lost)} acknowledged jobs neither delivered nor in a server "
            f"(deleted without delivery; {v.lost_reused_id} by a reused id)"
        )
    if v.unexpected:
        v.violations.append(f"unexpected: {len(v.unexpected)} ({v.unexpected[0]})")
    for cause in MUST_BE_ZERO:
        if v.repeats[cause]:
            v.violations.append(f"delivered twice after {cause}: {v.repeats[cause]}")
        if v.left[cause]:
            v.violations.append(
                f"left in a server after {cause}, though committed: {v.left[cause]}"
            )
    for (cycle, cause), extra in sorted(per_cycle.items()):
        if cause in MUST_BE_ZERO:
            continue
        counted = sum(growth.get(cycle, Counter()).values())
        if extra > counted:
            v.violations.append(
                f"cycle {cycle} ({cause}): {extra} jobs delivered twice, counters grew by "
                f"{counted} (uncounted)"
            )
        if extra > 2 * h.max_rows:
            v.violations.append(
                f"cycle {cycle} ({cause}): {extra} jobs delivered twice, more than two "
                f"batches of {h.max_rows} (unbounded)"
            )
    return v
