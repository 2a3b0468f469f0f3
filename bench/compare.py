#!/usr/bin/env python3
"""beanpole against Debian's beanstalkd, side by side on this machine.

Starts a fresh server for every run (beanpole, then beanstalkd, alternating: A B A B …),
drives it with the load generator ``beanpole-bench`` (rust/bench), and writes
``bench/README.md`` (method, machine, exact commands, tables, the targets of issue 4) and
``bench/results.png`` (throughput and p99 latency by scenario for both servers).

    python bench/compare.py                 # full run: 5 pairs per scenario
    python bench/compare.py --quick         # a fast look: 2 short pairs, smaller memory runs
    python bench/compare.py --only rt16 memory --pairs 3
    python bench/compare.py --suite log     # the write-ahead log figures (bench/log_bench.py)

The chart needs matplotlib (``pip install matplotlib``); without it the tables are still
written. Everything runs on 127.0.0.1; every run is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from launch import nofile_limit
from main_report import write_chart, write_report
from runner import Run, build_bench, memory_run, progress, run_scenario
from scenarios import ALL_KEYS, KINDS, ROOT, SCENARIOS


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--suite",
        choices=("main", "log"),
        default="main",
        help="main: the figures of issue 4 [default]; log: the write-ahead log figures "
        "(bench/log_bench.py, with its own options: --suite log --help)",
    )
    p.add_argument("--pairs", type=int, help="A/B pairs per scenario [5; --quick: 2]")
    p.add_argument("--quick", action="store_true", help="short runs for a fast look")
    p.add_argument(
        "--only",
        nargs="+",
        choices=ALL_KEYS,
        metavar="NAME",
        help=f"scenarios to run, of: {' '.join(ALL_KEYS)}",
    )
    p.add_argument("--bench", type=Path, help="the beanpole-bench binary [built with cargo]")
    p.add_argument("--no-build", action="store_true", help="do not run cargo build")
    p.add_argument("--readme", type=Path, default=ROOT / "bench" / "README.md")
    p.add_argument(
        "--chart", type=Path, help="where the chart goes [results.png beside the --readme file]"
    )
    p.add_argument("--raw", type=Path, help="also write every run's result as JSON lines")
    return p.parse_args(argv)


def plan(keys: Sequence[str], pairs: int) -> Iterator[tuple[str, int, str]]:
    for key in keys:
        for pair in range(pairs):
            for kind in KINDS:
                yield key, pair, kind


def main(argv: Sequence[str] | None = None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--suite", choices=("main", "log"), default="main")
    known, rest = pre.parse_known_args(argv)
    if known.suite == "log":
        import log_bench

        return log_bench.main(rest)
    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    pairs = args.pairs or (2 if args.quick else 5)
    keys = [k for k in ALL_KEYS if args.only is None or k in args.only]
    nofile = nofile_limit()
    bench = args.bench if args.bench is not None else build_bench(args.no_build)
    if not bench.exists():
        sys.exit(f"compare: {bench} does not exist")
    scen = {s.key: s for s in SCENARIOS}
    started = time.monotonic()
    runs: list[Run] = []
    todo = list(plan(keys, pairs))
    raw = args.raw.open("w") if args.raw else None
    for n, (key, pair, kind) in enumerate(todo, 1):
        try:
            if key == "memory":
                run = memory_run(pair, kind, bench, mode, nofile)
            else:
                run = run_scenario(scen[key], pair, kind, bench, mode, nofile)
        except RuntimeError as err:
            run = Run(key, kind, pair, None, -1, str(err))
        runs.append(run)
        progress(run, n, len(todo))
        if raw:
            raw.write(
                json.dumps(
                    {
                        "scenario": key,
                        "kind": kind,
                        "pair": pair,
                        "code": run.code,
                        "result": run.result,
                        "extra": run.extra,
                        "problem": run.problem,
                    }
                )
                + "\n"
            )
            raw.flush()
    if raw:
        raw.close()
    elapsed = time.monotonic() - started
    chart_path = args.chart or args.readme.with_name("results.png")
    chart = chart_path if write_chart(chart_path, runs, keys) else None
    write_report(args.readme, chart, runs, keys, mode, pairs, bench, elapsed, nofile)
    print(
        f"compare: wrote {args.readme}"
        + (f" and {chart}" if chart else "")
        + f" in {elapsed / 60:.1f} min",
        file=sys.stderr,
    )
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
