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

``python tests/diffrun.py [--cases N] [--seed S] [--jobs J] [--shrink]`` runs many
cases and prints the failures, shrunk to fewer steps on request, each with a
transcript draft.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client_common import drain
from diffgen import DEFAULT_MAX_JOB_SIZE, Case, Step, generate, valid
from diffmodel import ConnModel, Outcome
from diffrules import allowed
from diffwire import EOF, Conn, Event, escape, normalise
from servers import Running, start

QUIET = 0.05  # seconds of silence that end a read whose count is unknown
PATIENCE = 2.0  # seconds to wait for replies that should come
SHORT_TTR_BUDGET = 0.8  # seconds a case with TTR-1 jobs may take before it proves nothing
TRIES = 3


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


def compare(
    oracle: dict[int, list[Event]],
    subject: dict[int, list[Event]],
    quote: bool,
    final: bool = False,
) -> str | None:
    """The first difference, looking at the replies both have (all of them if final)."""
    for conn in sorted(oracle):
        mine, theirs = oracle[conn], subject.get(conn, [])
        for k, (a, b) in enumerate(zip(mine, theirs, strict=False)):
            if not normalise(a, quote).same(normalise(b, quote)):
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

    def steps(self) -> str | None:
        for index, step in enumerate(self.case.steps):
            if self.step(index, step):
                difference = compare(events(self.oracle), events(self.subject), self.quote)
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
        o, s = self.oracle.conn(step.conn), self.subject.conn(step.conn)
        o.step = s.step = index
        o.drain()
        before = self.expected.get(step.conn, 0)
        in_sync = len(o.events) == before
        # Nothing goes to a connection that may be waiting in reserve (see
        # diffrules.allowed), except a hang-up.
        waiting = len(o.events) < before and not step.hangup
        model = self.models.setdefault(step.conn, ConnModel(self.limit))
        # The generator kept to diffrules.allowed for the steps it made; skipped steps
        # change what a connection was sent: check again against what it was.
        final = step.note == "probe"
        kept = step.hangup or allowed(step.conn, step.data, self.models, self.loose, final)
        if o.eof or o.hung_up or waiting or not kept:
            self.skipped += 1
            return False
        if step.hangup:
            model.closed = True
            outcome = Outcome(1, True, True)
        else:
            outcome = model.feed(step.data)
        self.expected[step.conn] = before + outcome.replies
        # Read until the oracle falls quiet where the count cannot be trusted, and on
        # both sides where the step takes effect without a reply: the next step, maybe
        # on another connection, must not overtake it.
        quiet = outcome.uncertain or outcome.silent_effect or not in_sync
        if step.hangup:
            o.hang_up()
            o.read_quiet(PATIENCE, PATIENCE)
        else:
            o.send(step.data)
            if quiet:
                o.read_quiet(QUIET, PATIENCE)
            elif not o.read_until(self.expected[step.conn], PATIENCE):
                self.misses.append(index)
        for c in self.oracle.conns.values():
            c.step = index
            c.drain()
        if step.hangup:
            s.hang_up()
        else:
            s.send(step.data)
        for k, c in self.oracle.conns.items():
            sc = self.subject.conn(k)
            sc.step = index
            sc.read_until(len(c.events), PATIENCE)
        if quiet:
            s.read_quiet(QUIET, PATIENCE)
        return True

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
        return compare(events(self.oracle), events(self.subject), self.quote, final=True)


def run_once(case: Case, version: str) -> Result:

    started = time.monotonic()
    with (
        start("beanstalkd", *case.beanstalkd_args()) as bs,
        start("beanpole", **case.beanpole_config()) as bp,
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
            what = "hang up" if step.hangup else "drain" if step.drain else repr(step.data)
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
            yield f"c{step.conn + 1} " + ("shutdown" if step.hangup else ">> " + escape(step.data))
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
    seed: int, cases: int, version: str, jobs: int, loose_timeouts: bool | None = None
) -> list[Result]:
    loose = version != "1.12" if loose_timeouts is None else loose_timeouts
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_case, generate(seed + i, loose), version) for i in range(cases)]
        return [f.result() for f in futures]


def main(argv: list[str]) -> int:
    import transcript

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--show", type=int, default=3, help="failures to print in full")
    parser.add_argument("--shrink", action="store_true", help="shrink each failure shown")
    args = parser.parse_args(argv)
    version = transcript.protocol_version("beanstalkd")
    started = time.monotonic()
    results = run_many(args.seed, args.cases, version, args.jobs)
    failed = [r for r in results if r.difference]
    for r in failed[: args.show]:
        print(report(shrink(r.case, version) if args.shrink else r, version), end="\n\n")
    misses = sum(len(r.misses) for r in results)
    steps = sum(len(r.case.steps) for r in results)
    print(
        f"{len(results)} cases ({steps} steps) from seed {args.seed} in "
        f"{time.monotonic() - started:.1f} s: {len(failed)} differ; "
        f"{misses} reply counts mispredicted"
    )
    if failed:
        print("differing seeds:", " ".join(str(r.case.seed) for r in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    raise SystemExit(main(sys.argv[1:]))
