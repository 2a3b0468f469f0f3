"""Run a differential case (``diffgen.Case``) against a fresh beanstalkd and a fresh
beanpole, and compare every reply.

Each step goes to beanstalkd (the oracle) first. The runner keeps a ``diffmodel`` of
what each connection was sent and reads as many replies as it predicts; where the
count cannot be trusted (a reserve that may wait, a put header read with no reply
yet, or an earlier count the oracle did not meet) it reads until the oracle has been
quiet for ``QUIET`` seconds. Then the same bytes go to beanpole, which must send as
many replies on every connection as the oracle has so far. Replies are compared per
connection, in order, in ``diffwire``'s normal form; after the last step, whatever
either server still sends must match too (a case ends with ``list-tube-used`` on
every open connection).

``python tests/diffrun.py [--cases N] [--seed S] [--jobs J] [--steps K] [--shrink]
[--cluster]`` runs many cases and prints the failures, shrunk to fewer steps on
request, each with a transcript draft.

What is not sent, and why, is ``diffrules.allowed``. One class matters for long runs:
a connection woken in the middle of another connection's pipelined batch, with
commands of its own queued behind its ``reserve``. beanstalkd runs the two
connections' commands interleaved, one per turn of its event loop; beanpole finishes
the batch first (README, differences; ``test_cross_connection_order.py`` pins both).
So while a connection may be waiting with commands queued, the others send one
command per step, and only one connection at a time queues commands behind a wait;
a run's differences are then all outside that class.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

from client_common import drain
from diffgen import DEFAULT_MAX_JOB_SIZE, Case, Step, generate, valid
from diffmodel import ConnModel, Outcome
from diffrules import PRIVATE_NOTE, allowed, queues_behind_wait
from diffwire import EOF, TOLERANCE, Conn, Event, escape, normalise
from servers import CLUSTER, Running, start

QUIET = 0.05  # seconds of silence that end a read whose count is unknown
PATIENCE = 2.0  # seconds to wait for replies that should come
SHORT_TTR_BUDGET = 0.8  # seconds a case with TTR-1 jobs may take before it proves nothing
TRIES = 3
# Bytes queued behind a waiting reserve beyond which a hang-up is not sent (see
# Run.unseen_hangup): well under the smallest socket buffers of a loopback connection.
HANGUP_QUEUE_LIMIT = 32 * 1024


class Side:
    """One server's connections, opened on first use."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.conns: dict[int, Conn] = {}

    def conn(self, index: int) -> Conn:
        if index not in self.conns:
            self.conns[index] = Conn(self.address)
        return self.conns[index]

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


@dataclasses.dataclass
class Result:
    case: Case
    difference: str | None  # None: the servers agreed
    oracle: dict[int, list[Event]]
    subject: dict[int, list[Event]]
    elapsed: float
    misses: list[int]  # steps whose predicted reply count the oracle did not meet
    skipped: int  # steps not sent because the oracle had closed the connection
    # The case differed, then agreed when run again (see run_many's ``recheck``).
    unconfirmed: bool = False


def compare(
    oracle: dict[int, list[Event]],
    subject: dict[int, list[Event]],
    quote: bool,
    final: bool = False,
    tolerance: int = TOLERANCE,
) -> str | None:
    """The first difference, looking at the replies both have (all of them if final);
    counts of seconds may differ by ``tolerance``."""
    for conn in sorted(oracle):
        mine, theirs = oracle[conn], subject.get(conn, [])
        if mine and mine[-1].reset:
            # beanstalkd reset the connection: replies it sent that the client had not
            # read when the reset came are lost, so beanpole's replies after the last
            # one that arrived are not compared; beanpole must close the connection too.
            last = len(mine) - 1
            if len(theirs) > last and final and theirs[-1].data != EOF:
                return (
                    f"connection {conn}: beanstalkd closed it (with a reset) after "
                    f"{last} replies; beanpole kept it open"
                )
            mine, theirs = mine[:last], theirs[:last]
        for k, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            if cut_by_reset(oracle[conn], k, b):
                continue
            if not normalise(a, quote).same(normalise(b, quote), tolerance):
                return (
                    f"connection {conn}, reply {k + 1} (read after step {a.step}):\n"
                    f"  beanstalkd: {a.data!r}\n  beanpole:   {b.data!r}"
                )
        if final and len(mine) != len(theirs):
            k = min(len(mine), len(theirs))
            extra = (mine if len(mine) > k else theirs)[k]
            who = "beanstalkd" if len(mine) > k else "beanpole"
            return (
                f"connection {conn}: beanstalkd sent {len(mine)} replies, beanpole "
                f"{len(theirs)}; the first unmatched, from {who}: {extra.data!r}"
            )
    return None


def cut_by_reset(oracle: list[Event], k: int, subject: Event) -> bool:
    """Whether the oracle's reply ``k`` is the start of ``subject``'s whole reply, cut
    short because beanstalkd then reset the connection.

    beanstalkd reads a connection's input 224 bytes at a time; when it closes one (a
    ``quit``, a bad command) with pipelined input still unread, the kernel answers with
    a reset instead of an orderly close, and the client's kernel throws away what the
    client had not yet read, such as the end of a large RESERVED reply. beanpole has
    read its input by then and closes in order, so its client gets the whole reply.
    That is the kernel's doing, not a reply of the protocol: the cut reply counts as
    the same when it is the start of beanpole's (and whole replies beanstalkd sent
    after it, also lost, are not compared: see ``compare``)."""
    a = oracle[k]
    return (
        not a.whole
        and k + 1 < len(oracle)
        and oracle[k + 1].reset
        and subject.whole
        and subject.data.startswith(a.data)
    )


class Run:
    """One case against one pair of servers."""

    def __init__(self, case: Case, version: str, oracle: Running, subject: Running) -> None:
        self.case = case
        self.limit = DEFAULT_MAX_JOB_SIZE if case.max_job_size is None else case.max_job_size
        self.loose = case.loose_timeouts
        self.quote = version == "1.12"
        self.servers = (oracle, subject)
        self.oracle = Side(oracle.address)
        self.subject = Side(subject.address)
        # What each connection was actually sent (steps to a waiting connection are
        # skipped), and how many replies that should have brought so far.
        self.models: dict[int, ConnModel] = {}
        self.expected: dict[int, int] = {}
        self.misses: list[int] = []  # steps whose predicted replies did not all come
        self.skipped = 0
        # Connections whose last step queued commands behind a reserve that may wait,
        # and how many bytes that step sent.
        self.queued: set[int] = set()
        self.queued_bytes: dict[int, int] = {}
        # The longest time between sending a step to beanstalkd and sending it to
        # beanpole: a job's age or time-left counts from moments this far apart.
        self.gap = 0.0

    @property
    def tolerance(self) -> int:
        return TOLERANCE + math.ceil(self.gap)

    def steps(self) -> str | None:
        for index, step in enumerate(self.case.steps):
            if self.step(index, step):
                difference = compare(
                    events(self.oracle), events(self.subject), self.quote, tolerance=self.tolerance
                )
                if difference:
                    return difference
        return self.final_check(len(self.case.steps))

    def step(self, index: int, step: Step) -> bool:
        """Send ``step`` to both servers and read; False if it was not sent."""
        if step.drain:
            # A reply shows beanstalkd has its signal handlers; before them SIGUSR1 kills.
            if any(c.events for c in self.oracle.conns.values()):
                for server in self.servers:
                    drain(server)
            return False
        new = step.conn not in self.oracle.conns
        o, s = self.oracle.conn(step.conn), self.subject.conn(step.conn)
        if new:
            # A connection the servers have not accepted yet is not in their counts
            # (current-using, current-watching): on a loaded machine, wait for it.
            for side, server in ((self.oracle, self.servers[0]), (self.subject, self.servers[1])):
                admitted(side, server)
        o.step = s.step = index
        for c in self.oracle.conns.values():
            c.drain()
        before = self.expected.get(step.conn, 0)
        in_sync = len(o.events) == before
        ends = step.hangup or step.close
        # Nothing goes to a connection that may be waiting in reserve (see
        # diffrules.allowed), except a hang-up or a close.
        waiting = len(o.events) < before and not ends
        # The other connections waiting with commands queued behind their reserve.
        loaded = frozenset(
            k
            for k in self.queued
            if k != step.conn
            and not self.oracle.conns[k].closed
            and len(self.oracle.conns[k].events) < self.expected.get(k, 0)
        )
        model = self.models.setdefault(step.conn, ConnModel(self.limit))
        # The generator kept to diffrules.allowed for the steps it made; skipped steps
        # change what a connection was sent: check again against what it was.
        final = step.note == "probe"
        private = step.note == PRIVATE_NOTE
        kept = (
            ends or private or allowed(step.conn, step.data, self.models, self.loose, final, loaded)
        )
        if o.eof or o.hung_up or o.closed or waiting or not kept or self.unseen_hangup(step):
            self.skipped += 1
            return False
        self.queued.discard(step.conn)
        self.queued_bytes.pop(step.conn, None)
        if ends:
            model.closed = True
            outcome = Outcome(1 if step.hangup else 0, True, True)
        else:
            if queues_behind_wait(model, step.data):
                self.queued.add(step.conn)
                self.queued_bytes[step.conn] = len(step.data)
            outcome = model.feed(step.data)
            model.private |= private
        self.expected[step.conn] = before + outcome.replies
        # Read until the oracle falls quiet where the count cannot be trusted, and on
        # both sides where the step takes effect without a reply: the next step, maybe
        # on another connection, must not overtake it. The same where the step may
        # answer a reserve with commands queued behind it: they run meanwhile.
        quiet = outcome.uncertain or outcome.silent_effect or not in_sync or bool(loaded)
        sent = time.monotonic()
        if step.hangup:
            o.hang_up()
            o.read_quiet(PATIENCE, PATIENCE)
        elif step.close:
            o.close()
        else:
            o.send(step.data)
            if quiet:
                # This connection's own replies first, when their count is known: on
                # a loaded machine the oracle can be silent for longer than QUIET
                # before it answers, and a close of this connection at the next step
                # would then lose a reply that was only late.
                own = not outcome.uncertain and in_sync
                if own and not o.read_until(self.expected[step.conn], PATIENCE):
                    self.misses.append(index)
                o.read_quiet(QUIET, PATIENCE)
            elif not o.read_until(self.expected[step.conn], PATIENCE):
                self.misses.append(index)
        if step.close:
            settle(self.oracle, self.servers[0])
        for c in self.oracle.conns.values():
            c.step = index
            c.drain()
        self.gap = max(self.gap, time.monotonic() - sent)
        if step.hangup:
            s.hang_up()
        elif step.close:
            s.close()
        else:
            s.send(step.data)
        for k, c in self.oracle.conns.items():
            sc = self.subject.conn(k)
            sc.step = index
            sc.read_until(len(c.events), PATIENCE)
        if step.close:
            settle(self.subject, self.servers[1])
        elif quiet:
            s.read_quiet(QUIET, PATIENCE)
        return True

    def unseen_hangup(self, step: Step) -> bool:
        """Whether ``step`` hangs up or closes a connection still waiting in reserve
        behind more queued input than the sockets' buffers surely hold. beanstalkd
        reads nothing while a reserve waits, so the hang-up or close (a FIN behind that
        input) may never reach it: whether it does depends on the kernel's buffer
        sizes, not on the protocol. (Seed 1117267 with --steps 40 closed a connection
        with 135 KB queued: beanstalkd never saw the close, beanpole, which reads on,
        did, and applied the put queued next.)"""
        ends = step.hangup or step.close
        if not ends or self.queued_bytes.get(step.conn, 0) <= HANGUP_QUEUE_LIMIT:
            return False
        o = self.oracle.conns.get(step.conn)
        return o is not None and len(o.events) < self.expected.get(step.conn, 0)

    def final_check(self, index: int) -> str | None:
        """Whatever either server still sends; then all replies (and closes) must be
        the same."""
        for k, o in self.oracle.conns.items():
            s = self.subject.conns[k]
            o.step = s.step = index
            o.read_quiet(QUIET, PATIENCE)
            o.leftover()
            s.read_until(len(o.events), PATIENCE)
            s.read_quiet(QUIET, PATIENCE)
            s.leftover()
        return compare(
            events(self.oracle), events(self.subject), self.quote, True, self.tolerance
        )


#: The server under test: ``beanpole`` (one in-process server) or
#: ``servers.CLUSTER`` (a three-node cluster, through a follower), set by ``--cluster``.
SUBJECT = "beanpole"


def run_once(case: Case, version: str) -> Result:

    started = time.monotonic()
    with (
        start("beanstalkd", *case.beanstalkd_args()) as bs,
        start(SUBJECT, **case.beanpole_config()) as bp,
    ):
        run = Run(case, version, bs, bp)
        try:
            difference = run.steps()
        finally:
            run.oracle.close()
            run.subject.close()
    return Result(
        case,
        difference,
        events(run.oracle),
        events(run.subject),
        time.monotonic() - started,
        run.misses,
        run.skipped,
    )


def settle(side: Side, server: Running) -> None:
    """After a close, which no reply follows: give the server time to act on it (a job
    released, commands queued behind a reserve applied) before the next step, and
    read what that brings on the other connections."""
    time.sleep(QUIET)
    # On a loaded machine QUIET may not be enough for the server to have seen the
    # close: wait (up to PATIENCE) until it holds no more connections than are open.
    most = sum(1 for c in side.conns.values() if not (c.closed or c.eof))
    deadline = time.monotonic() + PATIENCE
    while connections(server) > most and time.monotonic() < deadline:
        time.sleep(0.005)
    for c in side.conns.values():
        c.read_quiet(QUIET, PATIENCE)


def admitted(side: Side, server: Running) -> None:
    """Wait (up to PATIENCE) until ``server`` holds every connection open on ``side``."""
    most = sum(1 for c in side.conns.values() if not (c.closed or c.eof))
    deadline = time.monotonic() + PATIENCE
    while connections(server) < most and time.monotonic() < deadline:
        time.sleep(0.005)


def connections(server: Running) -> int:
    """How many client connections ``server`` holds, asked without a command (which
    would change its counters): beanpole's own stats; beanstalkd's open sockets, less
    its listening one."""
    if server.server is not None:
        stats = server.server.stats()  # type: ignore[attr-defined]
        return int(stats["current-connections"])
    assert server.pid is not None
    fds = Path(f"/proc/{server.pid}/fd")
    sockets = 0
    for fd in fds.iterdir():
        try:
            sockets += os.readlink(fd).startswith("socket:")
        except OSError:  # closed while listed
            continue
    return sockets - 1


def events(side: Side) -> dict[int, list[Event]]:
    return {k: list(c.events) for k, c in side.conns.items()}


def run_case(case: Case, version: str) -> Result:
    """Run ``case``; a case with TTR-1 jobs that took too long to prove anything is run
    again (its jobs may have timed out at different steps on the two servers)."""
    result = run_once(case, version)
    for _ in range(TRIES - 1):
        if not (result.difference and case.short_ttr and result.elapsed > SHORT_TTR_BUDGET):
            break
        result = run_once(case, version)
    return result


def shrink(case: Case, version: str) -> Result:
    """A smaller case that still differs: drop steps, one at a time, while it does."""
    result = run_case(case, version)
    if result.difference is None:
        return result
    i = 0
    while i < len(case.steps):
        steps = case.steps[:i] + case.steps[i + 1 :]
        smaller = dataclasses.replace(case, steps=steps)
        trial = run_case(smaller, version) if valid(smaller) else None
        if trial is None or trial.difference is None:
            i += 1
        else:
            case, result = trial.case, trial
    return result


# ---------------------------------------------------------------------------- reports


def report(result: Result, version: str) -> str:
    case = result.case
    lines = [
        f"differential case seed {case.seed} (replay: BEANPOLE_DIFF_SEED={case.seed} "
        f"BEANPOLE_DIFF_CASES=1), max-job-size {case.max_job_size or 'default'}, "
        f"beanstalkd {version}",
        f"first difference: {result.difference}",
        "steps (i: connection, bytes sent, note; then the replies read after it):",
    ]
    for i, step in enumerate([*case.steps, None]):
        if step is None:
            lines.append(f"  [{i}] end: what arrived after the last step")
        else:
            what = (
                "hang up"
                if step.hangup
                else "close"
                if step.close
                else "drain"
                if step.drain
                else repr(step.data)
            )
            lines.append(f"  [{i}] c{step.conn} {what}  ({step.note})")
        for who, evs in (("beanstalkd", result.oracle), ("beanpole  ", result.subject)):
            for conn, es in sorted(evs.items()):
                got = [e.data for e in es if e.step == i]
                if got:
                    lines.append(f"        {who} c{conn}: {got!r}")
    lines.append("transcript draft (beanstalkd's replies):")
    lines.extend("  " + t for t in transcript_draft(result))
    return "\n".join(lines)


def transcript_draft(result: Result) -> Iterator[str]:
    """The case in the .t notation, expecting what beanstalkd sent."""
    case = result.case
    if case.max_job_size is not None:
        yield f"%max-job-size {case.max_job_size}"
    for i, step in enumerate([*case.steps, None]):
        if step is not None and step.drain:
            yield "# drain mode (beanstalkd: SIGUSR1)"
        elif step is not None:
            op = "shutdown" if step.hangup else "close" if step.close else ">> " + escape(step.data)
            yield f"c{step.conn + 1} " + op
        for conn in sorted(result.oracle):
            yield from draft_replies(result.oracle[conn], i, conn)


def draft_replies(evs: list[Event], step: int, conn: int) -> Iterator[str]:
    for e in evs:
        if e.step != step:
            continue
        if e.data == EOF:
            yield f"c{conn + 1} eof"
        elif e.data.startswith(b"OK ") and e.whole:
            body = e.data.partition(b"\r\n")[2]
            yield f"c{conn + 1} < OK {{len}}"
            for line in body[:-2].split(b"\n")[:-1]:
                yield "| " + escape(line)
        else:
            text = escape(e.data.removesuffix(b"\r\n"))
            yield f"c{conn + 1} < {text}"


# ---------------------------------------------------------------------------- many cases


def run_many(
    seed: int,
    cases: int,
    version: str,
    jobs: int,
    loose_timeouts: bool | None = None,
    progress: int = 0,
    steps: int | None = None,
    recheck: int = 0,
) -> list[Result]:
    """Run cases ``seed`` .. ``seed + cases - 1``, at most ``jobs`` at a time. The
    replies of cases that agree are not kept (a long run would hold them all);
    ``progress``: print a line after every that many cases; ``steps``: of each case
    (see ``diffgen.Generator``).

    ``recheck``: run a case that differs up to that many times again; if it agrees
    once, it is kept as ``unconfirmed`` (listed apart from the differences, with its
    first difference): on a machine loaded far beyond its cores the oracle can be
    slower than the runner's waits, and such a case shows the scheduler, not the
    servers. A difference that comes back every time is a difference."""
    loose = version != "1.12" if loose_timeouts is None else loose_timeouts
    results: list[Result] = []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending: set[Future[Result]] = set()
        submitted = 0
        while submitted < cases or pending:
            while submitted < cases and len(pending) < 4 * jobs:
                case = generate(seed + submitted, loose, steps)
                pending.add(pool.submit(run_case, case, version))
                submitted += 1
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                r = f.result()
                if r.difference is not None and recheck:
                    r = confirm(r, version, recheck)
                if r.difference is None:
                    r = dataclasses.replace(r, oracle={}, subject={})
                elif progress:
                    text = r.difference
                    shown = text if len(text) < 2000 else text[:2000] + "..."
                    what = "differed once, not on a re-run" if r.unconfirmed else "differs"
                    print(f"seed {r.case.seed} {what}: {shown}", flush=True)
                results.append(r)
                if progress and len(results) % progress == 0:
                    failed = [str(x.case.seed) for x in results if differs(x)]
                    once = [str(x.case.seed) for x in results if x.unconfirmed]
                    print(
                        f"{len(results)} cases in {time.monotonic() - started:.0f} s: "
                        f"{len(failed)} differ {' '.join(failed)}".rstrip()
                        + (f"; {len(once)} not on a re-run {' '.join(once)}" if once else ""),
                        flush=True,
                    )
    results.sort(key=lambda r: r.case.seed)
    return results


def differs(result: Result) -> bool:
    """A difference that stands (not one that went away on a re-run)."""
    return result.difference is not None and not result.unconfirmed


def confirm(result: Result, version: str, tries: int) -> Result:
    """``result`` (a difference) if the case differs on each of ``tries`` re-runs;
    otherwise the same, marked ``unconfirmed``."""
    for _ in range(tries):
        if run_case(result.case, version).difference is None:
            return dataclasses.replace(result, unconfirmed=True)
    return result


def main(argv: list[str]) -> int:
    import transcript

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--show", type=int, default=3, help="failures to print in full")
    parser.add_argument("--shrink", action="store_true", help="shrink each failure shown")
    parser.add_argument(
        "--progress", type=int, default=0, metavar="N", help="print a line every N cases"
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        metavar="K",
        help="steps per case (default: random, up to 40; cases with TTR-1 jobs at most 14)",
    )
    parser.add_argument(
        "--recheck",
        type=int,
        default=2,
        metavar="N",
        help="run a differing case up to N times again; one that then agrees is listed "
        "apart, as not confirmed (0: every difference counts)",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="test a three-node beanpole cluster through a follower (a fresh cluster a "
        "case) instead of one server",
    )
    args = parser.parse_args(argv)
    if args.cluster:
        global SUBJECT
        SUBJECT = CLUSTER
    version = transcript.protocol_version("beanstalkd")
    started = time.monotonic()
    results = run_many(
        args.seed,
        args.cases,
        version,
        args.jobs,
        progress=args.progress,
        steps=args.steps,
        recheck=args.recheck,
    )
    failed = [r for r in results if differs(r)]
    once = [r for r in results if r.unconfirmed]
    for r in failed[: args.show]:
        print(report(shrink(r.case, version) if args.shrink else r, version), end="\n\n")
    misses = sum(len(r.misses) for r in results)
    steps = sum(len(r.case.steps) for r in results)
    conns = sum(len({s.conn for s in r.case.steps}) for r in results)
    print(
        f"{len(results)} cases ({steps} steps, {conns / max(len(results), 1):.1f} "
        f"connections a case) from seed {args.seed} in "
        f"{time.monotonic() - started:.1f} s: {len(failed)} differ; "
        f"{len(once)} differed once and agreed on a re-run; "
        f"{misses} reply counts mispredicted"
    )
    if failed:
        print("differing seeds:", " ".join(str(r.case.seed) for r in failed))
    for r in once:
        print(f"not confirmed: seed {r.case.seed}: {r.difference}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    raise SystemExit(main(sys.argv[1:]))
