#!/usr/bin/env python3
"""How long a three-node cluster holds its clients up under a long load: builds side by side.

Nothing takes the jobs of a run of puts, so the queue grows (to about 2.5 million jobs in
40 s here) and every node snapshots that growing state on the way (docs/cluster.md, "How
a snapshot is built"). Each round starts a fresh cluster of every build (order reversed
every other round), runs ``beanpole-bench put --connections 100 --pipeline 1 --body-size
100`` against its leader for ``--seconds``, and meanwhile times each put of two probe
connections of its own (one put in flight each, bodies computed per put): a stall of the
leader or of its commits shows as the time it held them. After the run it reads every
node's term: one above the first leader's is an election held during the run. Prints
each run (puts/s, the probes' p50 and p99, how many probe puts waited 100 ms or more, the
longest wait, the terms) and the medians per build.

A build is ``NAME=DIR`` as for ``cluster_ab.py``: DIR holds the ``beanpole`` package with
its own native module, put first on the nodes' ``PYTHONPATH``.

    python3 bench/cluster_stalls.py --rounds 2 --build main=/tmp/main/python --build new=python
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster_bench import _Target, put_args, start_caught_up
from cluster_nodes import Cluster
from runner import run_bench
from scenarios import ROOT

PROBES = 2
LONG = 0.1  # seconds: a probe put this slow counts as held up


@dataclass
class StallRun:
    build: str
    puts_per_s: float = 0.0
    waits: list[float] = field(default_factory=list)
    terms: list[int] = field(default_factory=list)
    first_term: int = 0

    def quantile(self, q: float) -> float:
        xs = sorted(self.waits)
        return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else 0.0

    def describe(self) -> str:
        held = sum(1 for w in self.waits if w >= LONG)
        return (
            f"{self.build}: {self.puts_per_s:,.0f} puts/s; probes p50 "
            f"{self.quantile(0.5) * 1e3:.2f} ms, p99 {self.quantile(0.99) * 1e3:.2f} ms, "
            f"{held} of {len(self.waits)} waited {LONG * 1e3:.0f} ms or more, longest "
            f"{max(self.waits, default=0.0) * 1e3:,.0f} ms; terms {self.first_term} -> "
            f"{max(self.terms, default=0)}"
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--rounds", type=int, default=2, help="runs of every build [2]")
    p.add_argument("--seconds", type=int, default=40, help="seconds of puts per run [40]")
    p.add_argument("--bench", type=Path, default=ROOT / "target/release/beanpole-bench")
    p.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    return p.parse_args(argv)


def probe(port: int, index: int, stop: threading.Event, waits: list[float]) -> None:
    """Put jobs one at a time until ``stop``, recording how long each took."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        n = 0
        while not stop.is_set():
            body = f"probe {index}-{n} ".encode() * (1 + n % 7)
            t0 = time.perf_counter()
            s.sendall(b"put 1 0 60 %d\r\n%s\r\n" % (len(body), body))
            reply = b""
            while not reply.endswith(b"\r\n"):
                got = s.recv(64)
                if not got:
                    return
                reply += got
            waits.append(time.perf_counter() - t0)
            if not reply.startswith(b"INSERTED"):
                raise RuntimeError(f"probe put answered {reply!r}")
            n += 1


def terms(cluster: Cluster) -> list[int]:
    from beanpole import _core

    return [int(r["term"] or 0) for r in _core.cluster_status(cluster.file, 1.0)]


def run_build(a: argparse.Namespace, name: str, path: str) -> StallRun | None:
    saved = os.environ.get("PYTHONPATH")
    if path:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (path, saved) if p)
    root = Path(tempfile.mkdtemp(prefix="beanpole-cluster-stalls-", dir=a.tmp))
    cluster = Cluster(root, 3, None)
    run = StallRun(name)
    try:
        start_caught_up(cluster)
        lead = cluster.leader()
        run.first_term = max(terms(cluster))
        stop = threading.Event()
        threads = [
            threading.Thread(target=probe, args=(cluster.clients[lead], i, stop, run.waits))
            for i in range(PROBES)
        ]
        for t in threads:
            t.start()
        args = argparse.Namespace(connections=100, duration=a.seconds)
        server = _Target(cluster.clients[lead], cluster.nodes[lead].pid)
        code, result, err = run_bench(a.bench, put_args(args), server)  # type: ignore[arg-type]
        stop.set()
        for t in threads:
            t.join()
        if code != 0 or result is None:
            print(f"  {name}: the load failed: exit {code}: {err}", file=sys.stderr)
            return None
        run.puts_per_s = float(result["ops_per_s"])
        run.terms = terms(cluster)
        return run
    except RuntimeError as e:  # the cluster did not come up
        print(f"  {name} failed: {e}", file=sys.stderr)
        return None
    finally:
        cluster.stop_all()
        shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    builds = [b.split("=", 1) for b in a.build]
    runs: dict[str, list[StallRun]] = {name: [] for name, _ in builds}
    for rnd in range(a.rounds):
        for name, path in builds if rnd % 2 == 0 else builds[::-1]:
            run = run_build(a, name, path)
            if run is not None:
                runs[name].append(run)
                print(f"round {rnd + 1} {run.describe()}", flush=True)
    print()
    for name, mine in runs.items():
        if not mine:
            print(f"{name}: no run")
            continue
        held = [sum(1 for w in r.waits if w >= LONG) for r in mine]
        longest = [max(r.waits, default=0.0) * 1e3 for r in mine]
        elections = [max(r.terms, default=0) - r.first_term for r in mine]
        print(
            f"{name}: median {statistics.median(r.puts_per_s for r in mine):,.0f} puts/s; "
            f"probe puts held {LONG * 1e3:.0f} ms or more per run {held}; longest waits "
            f"{[round(x) for x in longest]} ms; terms gained {elections}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
