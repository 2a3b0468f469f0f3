#!/usr/bin/env python3
"""beanpole.Client against greenstalk, side by side in one run, against one beanpole server
running in its own process (so the client's CPU time is the client's alone).

    python bench/client_bench.py                 # 3 rounds, 200,000 jobs per batch figure
    python bench/client_bench.py --jobs 1000000  # the issue's 1M-job figures
    python bench/client_bench.py --smoke         # a few seconds; what the test runs

Per round, in this order: ``put_many`` of JOBS 100-byte bodies from one Python thread
(rate, and process CPU time per job), greenstalk's ``put`` loop over GS_JOBS bodies;
``reserve_many`` + ``delete_many`` draining the JOBS jobs, greenstalk's reserve/delete loop
over its GS_JOBS; single ``put`` round trips (LATENCY of each client, alternating). The
figures are per-job rates, so the two sides may use different counts. Medians over the
rounds are printed with the ratios; ``--json`` prints one JSON line as well.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launch import LISTENING  # the server's start line, shared with the other benches

ROOT = Path(__file__).resolve().parent.parent
BODY = b"x" * 100


class ServerProcess:
    """``python -m beanpole serve -p 0`` in a child process."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BEANPOLE_")}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in [str(ROOT / "python"), env.get("PYTHONPATH", "")] if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "beanpole", "serve", "-l", "127.0.0.1", "-p", "0"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Lines of the server's stderr, from a reader thread (a queue, so the wait for
        # the listening line can time out).
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        while True:
            line = lines.get(timeout=30)
            if line is None:
                raise SystemExit("the server exited before listening")
            match = LISTENING.search(line)
            if match:
                self.address = (match.group(1), int(match.group(2)))
                return

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bodies(n: int) -> Iterator[bytes]:
    for _ in range(n):
        yield BODY


def timed(fn: Any) -> tuple[float, float, Any]:
    """(wall seconds, process CPU seconds, result)."""
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - w0, time.process_time() - c0, result


def one_round(address: tuple[str, int], jobs: int, gs_jobs: int, latency: int) -> dict[str, float]:
    import greenstalk

    from beanpole.client import Client

    out: dict[str, float] = {}
    with Client(address, encoding=None) as c, greenstalk.Client(address, encoding=None) as g:
        wall, cpu, ids = timed(lambda: c.put_many(bodies(jobs)))
        assert len(ids) == jobs
        out["put_many_per_s"] = jobs / wall
        out["put_many_cpu_us_per_job"] = cpu / jobs * 1e6

        def gs_put() -> None:
            for _ in range(gs_jobs):
                g.put(BODY)

        wall, cpu, _ = timed(gs_put)
        out["gs_put_per_s"] = gs_jobs / wall
        out["gs_put_cpu_us_per_job"] = cpu / gs_jobs * 1e6

        def drain() -> int:
            done = 0
            while done < jobs:
                batch = c.reserve_many(1000)
                if not batch:
                    break
                c.delete_many(batch)
                done += len(batch)
            return done

        wall, cpu, done = timed(drain)
        assert done == jobs, done
        out["drain_many_per_s"] = jobs / wall

        def gs_drain() -> None:
            for _ in range(gs_jobs):
                g.delete(g.reserve(timeout=0))

        wall, cpu, _ = timed(gs_drain)
        out["gs_drain_per_s"] = gs_jobs / wall

        ours: list[int] = []
        theirs: list[int] = []
        for _ in range(latency):
            t0 = time.perf_counter_ns()
            c.put(BODY)
            t1 = time.perf_counter_ns()
            g.put(BODY)
            t2 = time.perf_counter_ns()
            ours.append(t1 - t0)
            theirs.append(t2 - t1)
        for name, samples in (("put", ours), ("gs_put", theirs)):
            samples.sort()
            out[f"{name}_p50_us"] = samples[len(samples) // 2] / 1000
            out[f"{name}_p99_us"] = samples[min(len(samples) - 1, len(samples) * 99 // 100)] / 1000
        left = c.reserve_many(2 * latency + 10)
        c.delete_many(left)
    return out


def report(args: argparse.Namespace, med: dict[str, float], ratios: dict[str, float]) -> str:
    """The human-readable summary."""
    head = f"beanpole.Client vs greenstalk, medians of {args.rounds} round(s)"
    rows = [
        f"{head}; jobs {args.jobs:,}, greenstalk jobs {args.gs_jobs:,}",
        f"  {'figure':<34}{'beanpole.Client':>16}{'greenstalk':>14}{'ratio':>9}",
    ]

    def row(name: str, ours: float, theirs: float, ratio: float, unit: str) -> None:
        rows.append(f"  {name:<34}{ours:>12,.1f} {unit:<3}{theirs:>10,.1f} {unit:<3}{ratio:>8.2f}x")

    row("put: jobs/s", med["put_many_per_s"], med["gs_put_per_s"], ratios["put_many_vs_gs_put"], "")
    cpu, gs_cpu = med["put_many_cpu_us_per_job"], med["gs_put_cpu_us_per_job"]
    row("put: client CPU us/job", cpu, gs_cpu, cpu / gs_cpu, "")
    row(
        "reserve+delete: jobs/s",
        med["drain_many_per_s"],
        med["gs_drain_per_s"],
        ratios["drain_many_vs_gs_drain"],
        "",
    )
    row("single put p50 (us)", med["put_p50_us"], med["gs_put_p50_us"], ratios["put_p50_vs_gs"], "")
    row("single put p99 (us)", med["put_p99_us"], med["gs_put_p99_us"], ratios["put_p99_vs_gs"], "")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--jobs", type=int, default=200_000, help="jobs per beanpole.Client batch figure"
    )
    parser.add_argument(
        "--gs-jobs", type=int, default=20_000, help="jobs per greenstalk loop figure"
    )
    parser.add_argument("--latency", type=int, default=5_000, help="single puts per client")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny counts, one round")
    parser.add_argument("--json", action="store_true", help="also print one JSON line")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.gs_jobs, args.latency, args.rounds = 2_000, 300, 200, 1
    server = ServerProcess()
    try:
        rounds = [
            one_round(server.address, args.jobs, args.gs_jobs, args.latency)
            for _ in range(args.rounds)
        ]
    finally:
        server.stop()
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    ratios = {
        "put_many_vs_gs_put": med["put_many_per_s"] / med["gs_put_per_s"],
        "drain_many_vs_gs_drain": med["drain_many_per_s"] / med["gs_drain_per_s"],
        "put_p50_vs_gs": med["put_p50_us"] / med["gs_put_p50_us"],
        "put_p99_vs_gs": med["put_p99_us"] / med["gs_put_p99_us"],
    }
    print(report(args, med, ratios))
    if args.json:
        print(
            json.dumps({"params": vars(args), "medians": med, "ratios": ratios, "rounds": rounds})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
