#!/usr/bin/env python3
"""Builds of beanpole against each other as three-node clusters: durable puts, alternating.

For the cluster what ``ab.py`` is for a single server: is this build's cluster cheaper?
Each round starts a fresh three-node cluster of every build (order reversed every other
round), runs ``beanpole-bench put --connections 100 --pipeline 1 --body-size 100`` against
its leader (or, with ``--via follower``, a follower) as ``cluster_bench.py`` does, and
prints puts/s and the three node processes' CPU per put (from ``/proc``, split by thread
name); at the end the median of each, the median of the per-round ratios to the first
build, and where the CPU went. On this shared machine the rate moves by ±10% run to run;
the CPU per put moves less, and a build's difference shows in it first.

A build is ``NAME=DIR``: DIR holds the ``beanpole`` package with its own native module (a
checkout's ``python/`` after ``scripts/dev-build.sh``, say), put first on the nodes'
``PYTHONPATH``; ``NAME=`` is the package this interpreter imports.

    python3 bench/cluster_ab.py --rounds 6 --build main=/tmp/main/python --build new=python
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cluster_bench import PutRun, cluster_run
from scenarios import ROOT


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--rounds", type=int, default=6, help="runs of every build [6]")
    p.add_argument("--duration", type=int, default=10, help="seconds of puts per run [10]")
    p.add_argument("--connections", type=int, default=100, help="client connections [100]")
    p.add_argument("--via", choices=("leader", "follower"), default="leader")
    p.add_argument("--bench", type=Path, default=ROOT / "target/release/beanpole-bench")
    p.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    return p.parse_args(argv)


def run_build(a: argparse.Namespace, path: str, rnd: int) -> PutRun | None:
    """One run of the build whose package is at ``path`` ('' for this interpreter's)."""
    saved = os.environ.get("PYTHONPATH")
    if path:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (path, saved) if p)
    root = Path(tempfile.mkdtemp(prefix="beanpole-cluster-ab-", dir=a.tmp))
    try:
        kind = "cluster" if a.via == "leader" else "follower"
        runs = cluster_run(a, a.bench, rnd, root, kind)
    except RuntimeError as e:  # the cluster did not come up
        print(f"  failed: {e}", file=sys.stderr)
        return None
    finally:
        # A run's logs and snapshots are a gigabyte or so: gone before the next.
        shutil.rmtree(root, ignore_errors=True)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    run = runs[0] if runs else None
    if run is None or run.rate is None or run.nodes_cpu_us_per_op is None:
        print(f"  failed: {run.problem if run else 'no run'}", file=sys.stderr)
        return None
    return run


def describe(run: PutRun) -> str:
    threads = ", ".join(
        f"{name} {cpu:.1f}" for name, cpu in sorted(run.threads_cpu_us_per_op.items()) if cpu >= 0.1
    )
    client = (run.result or {}).get("client_cpu_us_per_op")
    client_text = "" if client is None else f", client {client:.1f}"
    return (
        f"{run.rate:,.0f} puts/s, nodes {run.nodes_cpu_us_per_op:.1f} µs CPU/put "
        f"({threads}){client_text}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    builds = [tuple(b.split("=", 1)) for b in a.build]
    names = [name for name, _ in builds]
    if len(set(names)) != len(names):
        print("each --build needs a name of its own", file=sys.stderr)
        return 2
    done: dict[str, dict[int, PutRun]] = {name: {} for name in names}
    for rnd in range(a.rounds):
        for name, path in builds if rnd % 2 == 0 else builds[::-1]:
            run = run_build(a, path, rnd)
            if run is None:
                print(f"round {rnd + 1} {name}: failed", flush=True)
                continue
            done[name][rnd] = run
            print(f"round {rnd + 1} {name}: {describe(run)}", flush=True)
    base = names[0]
    missing = False
    print(f"\nvia the {a.via}, {a.connections} connections, {a.duration} s runs:")
    for name in names:
        runs = done[name]
        if not runs:
            print(f"{name}: no good run")
            missing = True
            continue
        rate = statistics.median(r.rate or 0.0 for r in runs.values())
        cpu = statistics.median(r.nodes_cpu_us_per_op or 0.0 for r in runs.values())
        line = f"{name}: median {rate:,.0f} puts/s, nodes {cpu:.1f} µs CPU/put of {len(runs)} runs"
        paired = [rnd for rnd in runs if rnd in done[base]]
        if name != base and paired:
            rate_x = statistics.median(
                (runs[r].rate or 0.0) / (done[base][r].rate or 1.0) for r in paired
            )
            cpu_x = statistics.median(
                (runs[r].nodes_cpu_us_per_op or 0.0) / (done[base][r].nodes_cpu_us_per_op or 1.0)
                for r in paired
            )
            line += f"; per round against {base}: {rate_x:.2f}x puts/s, {cpu_x:.2f}x CPU/put"
        print(line)
        threads: dict[str, list[float]] = {}
        for r in runs.values():
            for thread, value in r.threads_cpu_us_per_op.items():
                threads.setdefault(thread, []).append(value)
        where = ", ".join(
            f"{t} {statistics.median(v):.1f}"
            for t, v in sorted(threads.items())
            if statistics.median(v) >= 0.1
        )
        print(f"  by thread (median µs/put): {where}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
