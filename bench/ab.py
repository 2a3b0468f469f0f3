#!/usr/bin/env python3
"""beanpole against beanpole: variants of the server under one load, alternating.

For a question compare.py does not ask: is this flag, or this build, faster? Each
round starts every variant once with a fresh log directory (order reversed every other
round), runs ``beanpole-bench`` against it and prints puts/s and the server's CPU time
per operation; at the end the median of each and its ratio to the first variant's. The
CPU time per operation moves less than the rate when other work shares the machine.
A variant is ``NAME=FLAGS`` (``{dir}`` in FLAGS becomes a fresh directory);
``--build NAME=DIR`` runs that variant's server from another copy of the Python package
(a directory holding ``beanpole/``, with its own native module), for comparing builds of
the code.

    python3 bench/ab.py --rounds 4 --load "put --connections 10 --pipeline 1 --duration 3" \\
        --variant "t1=-b {dir} -f 0" --variant "t2=-b {dir} -f 0 --threads 2"
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from launch import start_server
from runner import run_bench
from scenarios import ROOT, A


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=4, help="runs of every variant [4]")
    p.add_argument("--load", required=True, help="beanpole-bench arguments, quoted")
    p.add_argument("--variant", action="append", required=True, metavar="NAME=FLAGS")
    p.add_argument("--build", action="append", default=[], metavar="NAME=DIR")
    p.add_argument("--bench", type=Path, default=ROOT / "target/release/beanpole-bench")
    p.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    return p.parse_args(argv)


def run_once(
    flags: str, build: str | None, load: list[str], bench: Path, tmp: Path
) -> tuple[float, float | None] | None:
    """One server of this variant under the load: puts/s and the server's CPU µs per
    operation (None where it could not be read), or None if the run failed."""
    log_dir = Path(tempfile.mkdtemp(prefix="beanpole-ab-", dir=tmp))
    saved = os.environ.get("PYTHONPATH")
    if build is not None:
        os.environ["PYTHONPATH"] = build
    try:
        flag_list = shlex.split(flags.replace("{dir}", str(log_dir)))
        try:
            server = start_server(A, flag_list, 65536)
        except RuntimeError as e:  # the server did not come up
            print(f"  failed: {e}", file=sys.stderr)
            return None
        try:
            code, result, err = run_bench(bench, load, server)
        finally:
            server.stop()
        # Hooks that fell behind: the server logs what its full event queue dropped.
        for line in server.log:
            if "events dropped" in line:
                print(f"  {line}", flush=True)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        shutil.rmtree(log_dir, ignore_errors=True)
    if code != 0 or result is None:
        print(f"  failed: exit {code}: {err[-300:]}", file=sys.stderr)
        return None
    cpu = result.get("server_cpu_us_per_op")
    return float(result["ops_per_s"]), None if cpu is None else float(cpu)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    variants = [tuple(v.split("=", 1)) for v in args.variant]
    builds = dict(tuple(b.split("=", 1)) for b in args.build)
    load = shlex.split(args.load)
    rates: dict[str, list[float]] = {name: [] for name, _ in variants}
    cpus: dict[str, list[float]] = {name: [] for name, _ in variants}
    for r in range(args.rounds):
        for name, flags in variants if r % 2 == 0 else variants[::-1]:
            run = run_once(flags, builds.get(name), load, args.bench, args.tmp)
            if run is None:
                print(f"round {r + 1} {name}: failed", flush=True)
                continue
            rate, cpu = run
            cpu_text = "" if cpu is None else f", server {cpu:.3f} µs CPU/op"
            print(f"round {r + 1} {name}: {rate:,.0f}/s{cpu_text}", flush=True)
            rates[name].append(rate)
            if cpu is not None:
                cpus[name].append(cpu)
    base = variants[0][0]
    first = statistics.median(rates[base]) if rates[base] else None
    first_cpu = statistics.median(cpus[base]) if cpus[base] else None
    missing = False
    for name, _ in variants:
        if not rates[name]:
            print(f"{name}: no good run")
            missing = True
            continue
        med = statistics.median(rates[name])
        ratio = f", {med / first:.2f}x {base}" if first else ""
        line = f"{name}: median {med:,.0f}/s of {len(rates[name])} runs{ratio}"
        if cpus[name]:
            cpu = statistics.median(cpus[name])
            line += f"; server {cpu:.3f} µs CPU/op"
            line += f", {cpu / first_cpu:.2f}x {base}" if first_cpu else ""
        print(line)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
