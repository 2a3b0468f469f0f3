#!/usr/bin/env python3
"""Cost of the web dashboard with many tubes: an embedded beanpole server with N tubes
(one job in each) and ``--http``.

Prints the median (and max) of: one tick of the dashboard's sampler (the snapshot of
every tube it takes once a second, in process; wall clock and the thread's CPU time,
steadier on a busy machine), one ``/api/tubes`` page sorted by ready jobs and one
``/api/server`` over real HTTP, and the size of that page.

    python3 bench/dashboard_bench.py --tubes 10000 --rounds 20
"""

from __future__ import annotations

import argparse
import time
import urllib.request
from collections.abc import Sequence

from metrics_bench import fill, ms

import beanpole


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tubes", type=int, default=10_000, help="tubes, one job each [10000]")
    p.add_argument("--rounds", type=int, default=20, help="times each is measured [20]")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    with beanpole.Server(port=0, http="127.0.0.1:0") as srv:
        address = srv.address
        http = srv.http_address
        assert isinstance(address, tuple) and http is not None
        fill(address, args.tubes)
        base = f"http://{http[0]}:{http[1]}"
        dashboard = srv.dashboard()
        assert dashboard is not None
        sampler = dashboard.watched("local").sampler
        ticks, tick_cpu, pages, servers = [], [], [], []
        size = 0
        for _ in range(args.rounds):
            start, cpu = time.perf_counter(), time.thread_time()
            sampler.tick()
            ticks.append(time.perf_counter() - start)
            tick_cpu.append(time.thread_time() - cpu)
            start = time.perf_counter()
            with urllib.request.urlopen(
                base + "/api/tubes?sort=current-jobs-ready&order=desc&limit=50"
            ) as r:
                size = len(r.read())
            pages.append(time.perf_counter() - start)
            start = time.perf_counter()
            with urllib.request.urlopen(base + "/api/server") as r:
                r.read()
            servers.append(time.perf_counter() - start)
        print(f"tubes: {args.tubes}, rounds: {args.rounds}")
        print(f"sampler tick (every tube, once a second): {ms(ticks)}; CPU {ms(tick_cpu)}")
        print(f"store lock held by a snapshot: {srv.last_snapshot_lock_seconds * 1e3:.2f} ms")
        print(f"/api/tubes, a page of 50 sorted by ready: {ms(pages)}, {size} bytes")
        print(f"/api/server: {ms(servers)}")


if __name__ == "__main__":
    main()
