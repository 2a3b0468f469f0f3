"""Cluster chaos: seeded workers against beanpole node processes behind a
fault-injecting proxy, every command and reply recorded, then the history checked
(bench/cluster_chaos_check.py).

    python bench/cluster_chaos.py --seed 1 --seconds 30 --workers 4
    python bench/cluster_chaos.py --seed 1 --runs 50 --seconds 12
    python bench/cluster_chaos.py --seed 1 --seconds 10 --no-log --faults kill   # must fail

Today it runs against one node (``--nodes 1``; the replicated cluster will add nodes
and a proxy on every directed link between them). A node is ``python -m beanpole
serve -l 127.0.0.1 -p 0 -b DIR -f 0`` (every acknowledged change fsynced before its
reply); clients reach it only through its proxy (bench/cluster_chaos_proxy.py), which
follows it to a new port when it restarts. ``--workers`` threads each run a seeded mix
of put (unique bodies, TTR 1-3 s, some delayed), reserve-with-timeout, delete,
release (some delayed), bury, touch, kick, kick-job, peek*, stats-job, with a share of
reservations left to run out their TTR (bench/cluster_chaos_load.py).

At seeded moments a fault hits a node, for a seeded time: ``kill`` (SIGKILL, then a
restart on the same directory), ``term`` (SIGTERM, restart), ``stop`` (SIGSTOP, then
SIGCONT), ``cut`` (the proxy closes every connection and refuses new ones),
``oneway`` (the proxy drops the bytes of one direction; those connections close at
the heal), ``stall`` (the proxy holds all bytes) and ``latency`` (each chunk waits).
Power loss (SIGKILL, then the files cut back to what was last fsynced) is not done:
which bytes were fsynced is not knowable from outside the process; with ``-f 0``
nothing acknowledged is outside the fsynced part, so a SIGKILL is its closest stand-in.

At the end every fault is healed, the workers stop and close their connections, and
a drain kicks, reserves and deletes what is left until ``stats`` shows no job (all
recorded). The checker's counts are printed; the exit status is 1 on any violation or
a drain that could not finish. ``--no-log`` runs the node without ``-b``, so that a
SIGKILL loses acknowledged jobs: it shows the checker failing a run.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from cluster_chaos_check import Verdict, check, load, report
from cluster_chaos_load import Recorder, Worker, drain
from cluster_chaos_proxy import Proxy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servechild import ServeChild

FAULTS = ("kill", "term", "stop", "cut", "oneway", "stall", "latency")
DRAIN_FOR = 60.0  # seconds the final drain may take
FAULT_GAP = (0.3, 2.0)  # seconds between faults
FAULT_HOLD = (0.1, 2.0)  # seconds a fault lasts


class Node:
    """One node process and the proxy in front of its client port."""

    def __init__(self, ident: int, work: Path, log: bool) -> None:
        self.id = ident
        self.dir = work / f"node{ident}"
        self.log = log
        self.child: ServeChild | None = None
        self.proxy: Proxy | None = None

    def start(self) -> None:
        args = ["-l", "127.0.0.1", "-p", "0"]
        if self.log:
            self.dir.mkdir(parents=True, exist_ok=True)
            args += ["-b", str(self.dir), "-f", "0"]
        self.child = ServeChild(*args)
        address = self.child.addresses()[0]
        assert isinstance(address, tuple), address
        if self.proxy is None:
            self.proxy = Proxy(address).start()
        else:
            self.proxy.retarget(address)

    def signal(self, sig: signal.Signals) -> None:
        assert self.child is not None
        os.kill(self.child.proc.pid, sig)

    def down(self, how: str) -> None:
        assert self.child is not None
        if how == "kill":
            self.child.kill()
        else:
            self.child.stop()
        self.child = None

    def close(self) -> None:
        if self.child is not None:
            self.signal(signal.SIGCONT)
            self.child.kill()
        if self.proxy is not None:
            self.proxy.close()

    @property
    def port(self) -> int:
        assert self.proxy is not None
        return self.proxy.port


class Faults:
    """The fault thread: a seeded fault at a seeded moment, held, then healed."""

    def __init__(self, nodes: list[Node], rec: Recorder, rng: random.Random,
                 kinds: list[str], cycles: int | None) -> None:  # fmt: skip
        self.nodes = nodes
        self.rec = rec
        self.rng = rng
        self.kinds = kinds
        self.cycles = cycles
        self.done: Counter[str] = Counter()
        self.stop = threading.Event()
        self.finished = threading.Event()  # set once --cycles faults have run
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="faults", daemon=True)

    def note(self, kind: str, node: Node, **more: object) -> None:
        self.rec.write({"t": "fault", "kind": kind, "node": node.id, "at": time.monotonic_ns(),
                        **more})  # fmt: skip

    def _run(self) -> None:
        try:
            while not self.stop.wait(self.rng.uniform(*FAULT_GAP)):
                if self.cycles is not None and sum(self.done.values()) >= self.cycles:
                    self.finished.set()
                    return
                kind = self.rng.choice(self.kinds)
                self.one(kind, self.rng.choice(self.nodes), self.rng.uniform(*FAULT_HOLD))
                self.done[kind] += 1
        except BaseException as e:  # reported by the run, which then stops
            self.error = e
            self.finished.set()

    def one(self, kind: str, node: Node, hold: float) -> None:
        proxy = node.proxy
        assert proxy is not None
        if kind in ("kill", "term"):
            self.note(kind, node)
            node.down(kind)
            time.sleep(hold / 2)
            node.start()
            self.note("restart", node)
            return
        if kind == "stop":
            self.note("stop", node)
            node.signal(signal.SIGSTOP)
            time.sleep(hold)
            node.signal(signal.SIGCONT)
            self.note("cont", node)
            return
        direction = self.rng.choice(("up", "down"))
        self.note(kind, node, direction=direction if kind == "oneway" else None)
        if kind == "cut":
            proxy.cut()
        elif kind == "oneway":
            proxy.oneway(direction)
        elif kind == "stall":
            proxy.stall()
        else:
            proxy.latency(self.rng.uniform(0.02, 0.3))
        time.sleep(hold)
        proxy.heal()
        self.note("heal", node)


def run_once(args: argparse.Namespace, seed: int, work: Path) -> tuple[Verdict, str]:
    """One seeded run in ``work``; the verdict and a one-line summary."""
    rng = random.Random(seed)
    rec = Recorder(work / "history.jsonl")
    nodes = [Node(i + 1, work, not args.no_log) for i in range(args.nodes)]
    stop = threading.Event()
    try:
        for n in nodes:
            n.start()

        def route(r: random.Random) -> tuple[int, int]:
            node = r.choice(nodes)
            return node.id, node.port

        workers = [Worker(rec, i, seed, route, stop) for i in range(args.workers)]
        faults = Faults(nodes, rec, rng, args.faults, args.cycles)
        started = time.monotonic()
        for w in workers:
            w.thread.start()
        faults.thread.start()
        if args.cycles is None:
            faults.finished.wait(args.seconds)
        else:
            faults.finished.wait()
        faults.stop.set()
        faults.thread.join()
        stop.set()
        for w in workers:
            w.thread.join(timeout=30)
        elapsed = time.monotonic() - started
        if faults.error is not None:
            raise faults.error
        drained = drain(rec, nodes[0].id, nodes[0].port, time.monotonic() + DRAIN_FOR)
    finally:
        stop.set()
        for n in nodes:
            n.close()
        rec.close()
    h = load(work / "history.jsonl")
    v = check(h)
    if not drained:
        v.problems.append(f"the drain did not empty the server within {DRAIN_FOR:.0f}s")
    lost_replies = sum(1 for o in h.ops if o.ret is None)
    done = " ".join(f"{k} {n}" for k, n in sorted(faults.done.items())) or "none"
    counts = " ".join(f"{k} {n}" for k, n in v.counts().items())
    line = (
        f"seed {seed}: {elapsed:.1f}s, {args.workers} workers, {len(h.ops)} commands "
        f"({lost_replies} without reply), faults: {done}; jobs {v.jobs}, acknowledged "
        f"{v.acknowledged}; {counts}"
    )
    return v, line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", type=int, default=1, help="runs, with seeds seed, seed+1, ...")
    p.add_argument("--seconds", type=float, default=30.0, help="load time of a run")
    p.add_argument("--cycles", type=int, default=None,
                   help="faults per run (instead of --seconds)")  # fmt: skip
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--nodes", type=int, default=1, help="nodes (only 1 until the cluster lands)")
    p.add_argument("--faults", default=",".join(FAULTS),
                   help=f"comma-separated fault kinds, of {', '.join(FAULTS)}")  # fmt: skip
    p.add_argument("--no-log", action="store_true",
                   help="nodes without -b (a SIGKILL loses jobs)")  # fmt: skip
    p.add_argument("--keep", type=Path, default=None,
                   help="keep each run's directory (its history.jsonl) under this")  # fmt: skip
    args = p.parse_args(argv)
    args.faults = [f for f in args.faults.split(",") if f]
    bad = [f for f in args.faults if f not in FAULTS]
    if bad or not args.faults:
        p.error(
            f"unknown fault kind {bad[0] if bad else '(none)'}; choose from {', '.join(FAULTS)}"
        )
    if args.nodes != 1:
        p.error("--nodes: only 1 until the replicated cluster lands")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    failed = 0
    totals: Counter[str] = Counter()
    for seed in range(args.seed, args.seed + args.runs):
        base = args.keep if args.keep is not None else Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"cluster-chaos-{seed}-", dir=base))
        v, line = run_once(args, seed, work)
        print(line, flush=True)
        totals.update(v.counts())
        if not v.ok:
            failed += 1
            print(report(v), flush=True)
            print(f"  history kept in {work}", flush=True)
        elif args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.runs > 1:
        counts = " ".join(f"{k} {n}" for k, n in totals.items())
        print(f"{args.runs} runs, {failed} failed; {counts}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
