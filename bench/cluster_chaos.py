"""Cluster chaos: seeded workers against beanpole node processes behind fault-injecting
proxies, every command and reply recorded, then the history checked
(bench/cluster_chaos_check.py).

    python bench/cluster_chaos.py --seed 1 --seconds 30 --workers 4
    python bench/cluster_chaos.py --seed 1 --runs 50 --seconds 12
    python bench/cluster_chaos.py --seed 1 --seconds 10 --no-log --faults kill   # must fail
    python bench/cluster_chaos.py --nodes 3 --seed 1 --runs 20 --seconds 12     # a cluster
    python bench/cluster_chaos.py --nodes 3 --seed 1 --runs 200 --seconds 12 --jobs 2

``--nodes 1`` (the default) runs a single server: ``python -m beanpole serve -l
127.0.0.1 -p 0 -b DIR -f 0`` (every acknowledged change fsynced before its reply);
clients reach it only through its proxy (bench/cluster_chaos_proxy.py), which follows
it to a new port when it restarts. ``--nodes 3`` or ``5`` runs a replicated cluster
(``serve --cluster FILE --node N -b DIR``) with a proxy on every directed link between
two nodes and one in front of each node's client address, and a monitor that sees
which node serves (bench/cluster_chaos_nodes.py; it needs root). ``--workers``
threads each run a seeded mix of put (unique bodies, TTR 1-3 s, some delayed),
reserve-with-timeout, delete, release (some delayed), bury, touch, kick, kick-job,
peek*, stats-job, with a share of reservations left to run out their TTR
(bench/cluster_chaos_load.py); in a cluster they connect to the node seen serving
(another now and then) and to another node when their connection goes.

At seeded moments a fault hits, for a seeded time (bench/cluster_chaos_faults.py
lists them): on one node SIGKILL, SIGTERM or SIGSTOP of the server and cuts, one-way
cuts, stalls and latency on its client proxy; in a cluster SIGKILL of the leader, of a
follower or of every node, SIGTERM, SIGSTOP of the leader, a wiped data directory,
cuts (both ways or one way), stalls and latency on the links between nodes, a
simulated power loss (SIGKILL, then the node's files cut back to what it had
fsynced, as its sync record says: bench/cluster_chaos_power.py) and membership
changes under load (two spare nodes added and promoted, then two members removed,
the leader most of the time: bench/cluster_chaos_members.py). On one node, power
loss is not simulated: a single server keeps no sync record; with an fsync before
every acknowledgement its SIGKILL is the closest stand-in.

Ports come from a registry every harness process shares (bench/cluster_chaos_nodes.py,
``Ports``); a run whose node still finds its port taken is void and run again on
other ports, and any other failure of the harness counts as a harness error, never a
pass. ``--jobs N`` runs N seeds at once, each in a process of its own.

At the end every fault is healed, the workers stop and close their connections, and
a drain (on the node that serves) kicks, reserves and deletes what is left until
``stats`` shows no job (all recorded). The checker's counts are printed; the exit
status is 1 on any violation or a drain that could not finish. ``--no-log`` runs the
node without ``-b``, so that a SIGKILL loses acknowledged jobs: it shows the checker
failing a run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from cluster_chaos_check import Verdict, check, load, report
from cluster_chaos_faults import (
    CLUSTER_FAULTS,
    LEADER_WAIT,
    NODE_FAULTS,
    ClusterFaults,
    Faults,
    NodeFaults,
)
from cluster_chaos_load import Recorder, Worker, drain
from cluster_chaos_nodes import ClusterNode, Monitor, Net, PortTaken, namespaces_work
from cluster_chaos_proxy import Proxy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from servechild import ServeChild

DRAIN_FOR = 60.0  # seconds the final drain may take
PORT_TRIES = 3  # runs of a seed whose node found its port taken
SPARES = 2  # nodes that join and leave with the ``members`` fault (3 -> 5 -> 3)


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


def run_once(args: argparse.Namespace, seed: int, work: Path) -> tuple[Verdict, str]:
    """One seeded run in ``work``; the verdict and a one-line summary."""
    rng = random.Random(seed)
    rec = Recorder(work / "history.jsonl")
    stop = threading.Event()
    cluster = args.nodes > 1
    net: Net | None = None
    monitor: Monitor | None = None
    nodes: list[Node] | list[ClusterNode] = []
    faults: Faults | None = None
    try:
        token: Path | None = None
        if cluster:
            grows = "members" in args.faults
            net = Net(args.nodes, work, spares=SPARES if grows else 0)
            if grows:
                token = work / "admin-token"
                token.write_text(f"chaos-{seed}-{random.getrandbits(64):016x}\n")
            by_id: dict[int, ClusterNode] = {}
            monitor = Monitor(net, rec, lambda j: by_id[j].pid if j in by_id else None).start()
            nodes = [
                ClusterNode(i, net, work, token, random.Random(f"{seed}-stall-{i}"))
                for i in net.ids
            ]
            by_id.update({n.id: n for n in nodes})
        else:
            nodes = [Node(i + 1, work, not args.no_log) for i in range(args.nodes)]
        for n in nodes:
            if net is None or n.id in net.members:
                n.start()
        by_id = {n.id: n for n in nodes}

        def members() -> list[Node] | list[ClusterNode]:
            if net is None:
                return nodes
            return [n for n in nodes if n.id in net.members]  # type: ignore[return-value]

        def leader() -> Node | ClusterNode | None:
            if monitor is None:
                return nodes[0]
            lead = monitor.wait_leader(LEADER_WAIT)
            return None if lead is None else by_id[lead]

        def route(r: random.Random) -> tuple[int, int]:
            now: list[Node | ClusterNode] = list(members())
            lead = nodes[0] if monitor is None else by_id.get(monitor.leader() or 0)
            node = lead if lead is not None and lead in now and r.random() < 0.9 else r.choice(now)
            return node.id, node.port

        def drain_route() -> tuple[int, int]:
            node = leader()
            if node is None:
                raise OSError("no node serves")
            return node.id, node.port

        if leader() is None:
            raise RuntimeError(f"no node served within {LEADER_WAIT:.0f}s of the start")
        workers = [Worker(rec, i, seed, route, stop) for i in range(args.workers)]
        if net is not None and monitor is not None:
            cnodes = [n for n in nodes if isinstance(n, ClusterNode)]
            faults = ClusterFaults(cnodes, net, monitor, token, rec, rng, args.faults, args.cycles)
        else:
            faults = NodeFaults(nodes, rec, rng, args.faults, args.cycles)
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
        if net is not None:
            net.heal()
        stop.set()
        for w in workers:
            w.thread.join(timeout=30)
        elapsed = time.monotonic() - started
        if faults.error is not None:
            raise faults.error
        drained = drain(rec, drain_route, time.monotonic() + DRAIN_FOR)
    finally:
        stop.set()
        if monitor is not None:
            monitor.close()
        for n in nodes:
            n.close()
        if net is not None:
            net.close()
        rec.close()
    h = load(work / "history.jsonl")
    v = check(h)
    if not drained:
        v.problems.append(f"the drain did not empty the server within {DRAIN_FOR:.0f}s")
    lost_replies = sum(1 for o in h.ops if o.ret is None)
    assert faults is not None
    done = " ".join(f"{k} {n}" for k, n in sorted(faults.done.items())) or "none"
    counts = " ".join(f"{k} {n}" for k, n in v.counts().items())
    leaders = ""
    if monitor is not None:
        leaders = f", {monitor.changes} terms served"
    line = (
        f"seed {seed}: {elapsed:.1f}s, {args.nodes} node{'s' if cluster else ''}, "
        f"{args.workers} workers, {len(h.ops)} commands ({lost_replies} without reply), "
        f"faults: {done}{leaders}; jobs {v.jobs}, acknowledged {v.acknowledged}; {counts}"
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
    p.add_argument("--jobs", type=int, default=1,
                   help="runs at once, each in a process of its own")  # fmt: skip
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="1: a single server; 3 or 5: a replicated cluster (needs root)",
    )
    p.add_argument(
        "--faults",
        default=None,
        help=f"comma-separated fault kinds; on one node of {', '.join(NODE_FAULTS)} "
        f"(all by default), in a cluster of {', '.join(CLUSTER_FAULTS)}",
    )
    p.add_argument(
        "--no-log",
        action="store_true",
        help="nodes without -b (a SIGKILL loses jobs; one node only)",
    )
    p.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each run's directory (its history.jsonl) under this",
    )
    args = p.parse_args(argv)
    if args.nodes not in (1, 3, 5):
        p.error("--nodes: 1, 3 or 5")
    kinds = NODE_FAULTS if args.nodes == 1 else CLUSTER_FAULTS
    args.faults = [f for f in (args.faults or ",".join(kinds)).split(",") if f]
    bad = [f for f in args.faults if f not in kinds]
    if bad or not args.faults:
        p.error(f"unknown fault kind {bad[0] if bad else '(none)'}; choose from {', '.join(kinds)}")
    if args.nodes > 1:
        if args.no_log:
            p.error("--no-log: one node only")
        why = namespaces_work()
        if why is not None:
            p.error(f"--nodes {args.nodes}: each node needs a mount namespace: {why}")
    return args


@dataclass
class Outcome:
    """One seed's result, as a worker process hands it back."""

    seed: int
    lines: list[str] = field(default_factory=list)  # what to print, in order
    counts: dict[str, int] = field(default_factory=dict)
    ok: bool = False
    error: str | None = None  # a harness error: the run says nothing either way


def one_seed(args: argparse.Namespace, seed: int) -> Outcome:
    """Run ``seed``, again on other ports (up to PORT_TRIES times) while a node's port
    was taken by another process; any other failure of the harness is reported as
    such, with the run's directory kept."""
    out = Outcome(seed)
    base = args.keep if args.keep is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, PORT_TRIES + 1):
        work = Path(tempfile.mkdtemp(prefix=f"cluster-chaos-{seed}-", dir=base))
        try:
            v, line = run_once(args, seed, work)
        except PortTaken as e:
            out.lines.append(f"seed {seed}: attempt {attempt} void: {e}")
            if args.keep is None:
                shutil.rmtree(work, ignore_errors=True)
            continue
        except Exception as e:  # any failure of the harness is reported
            out.error = f"{type(e).__name__}: {e}"
            out.lines.append(f"seed {seed}: harness error: {out.error}; kept in {work}")
            return out
        out.lines.append(line)
        out.counts = v.counts()
        out.ok = v.ok
        if not v.ok:
            out.lines += [report(v), f"  history kept in {work}"]
        elif args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        return out
    out.error = f"a node's port was taken on each of {PORT_TRIES} tries"
    out.lines.append(f"seed {seed}: harness error: {out.error}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    seeds = range(args.seed, args.seed + args.runs)
    failed = errors = 0
    totals: Counter[str] = Counter()

    def take(out: Outcome) -> None:
        nonlocal failed, errors
        for line in out.lines:
            print(line, flush=True)
        totals.update(out.counts)
        if out.error is not None:
            errors += 1
        elif not out.ok:
            failed += 1

    if args.jobs == 1:
        for seed in seeds:
            take(one_seed(args, seed))
    else:
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=spawn) as pool:
            for future in as_completed([pool.submit(one_seed, args, s) for s in seeds]):
                take(future.result())
    if args.runs > 1:
        counts = " ".join(f"{k} {n}" for k, n in totals.items())
        print(f"{args.runs} runs, {failed} failed, {errors} harness errors; {counts}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
