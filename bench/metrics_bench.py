#!/usr/bin/env python3
"""Scrape cost of ``/metrics`` with many tubes: an embedded beanpole server with N tubes
(one job in each), scraped over real HTTP K times.

Prints the median (and max) of: the whole scrape as the client sees it, the CPU time
of the same work done in process (steadier than the wall clock on a busy machine), and
the time the native snapshot held the store lock (measured in Rust around the locked
part of the snapshot). Also times ``beanpole stats --tubes``'s pipelined fetch of every
tube over the protocol, against beanpole and, when installed, Debian's beanstalkd.

    python3 bench/metrics_bench.py --tubes 10000 --scrapes 20
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence

import beanpole
from beanpole.client.stats import StatsClient
from beanpole.ops.http import collector_of, metrics_route


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tubes", type=int, default=10_000, help="tubes, one job each [10000]")
    p.add_argument("--scrapes", type=int, default=20, help="scrapes to time [20]")
    p.add_argument("--max-tubes", type=int, default=1000, help="--metrics-max-tubes [1000]")
    p.add_argument("--no-beanstalkd", action="store_true", help="skip the beanstalkd fetch")
    return p.parse_args(argv)


def fill(address: tuple[str, int], tubes: int) -> None:
    """One job in each of ``tubes`` tubes, pipelined over one connection."""
    with socket.create_connection(address) as sock:
        batch = 1000
        for start in range(0, tubes, batch):
            n = min(batch, tubes - start)
            sock.sendall(
                b"".join(b"use t%d\r\nput 0 0 600 1\r\nx\r\n" % (start + i) for i in range(n))
            )
            want = 2 * n
            got = b""
            while got.count(b"\r\n") < want:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    raise SystemExit("server closed the connection while filling")
                got += chunk


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:.2f} ms, max {max(values) * 1e3:.2f} ms"


def fetch_times(address: tuple[str, int], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        with StatsClient(address) as client:
            client.snapshot()
        out.append(time.perf_counter() - t0)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    with beanpole.Server(port=0, http="0", metrics_max_tubes=args.max_tubes) as srv:
        address = (srv.host, srv.port)
        fill(address, args.tubes)
        host, port = srv.http_address or ("", 0)
        url = f"http://{host}:{port}/metrics"
        scrape: list[float] = []
        lock: list[float] = []
        size = 0
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            body = urllib.request.urlopen(url, timeout=30).read()
            scrape.append(time.perf_counter() - t0)
            lock.append(srv.last_snapshot_lock_seconds)
            size = len(body)
        # The same work in this thread, timed in CPU seconds: less sensitive than the
        # wall clock to other processes on a busy machine.
        route = metrics_route(collector_of(srv))
        cpu: list[float] = []
        for _ in range(args.scrapes):
            c0 = time.thread_time()
            route()
            cpu.append(time.thread_time() - c0)
        snaps: list[float] = []
        for _ in range(args.scrapes):
            t0 = time.perf_counter()
            srv.snapshot()
            snaps.append(time.perf_counter() - t0)
        print(f"tubes: {len(srv.tubes())}, metrics body: {size} bytes")
        print(f"scrape /metrics (HTTP, whole): {ms(scrape)}")
        print(f"scrape CPU time (in process):  {ms(cpu)}")
        print(f"store lock held per snapshot:  {ms(lock)}")
        print(f"Server.snapshot() in Python:   {ms(snaps)}")
        print(f"pipelined fetch, beanpole:     {ms(fetch_times(address, 5))}")
    exe = shutil.which("beanstalkd")
    if exe and not args.no_beanstalkd:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        proc = subprocess.Popen([exe, "-l", "127.0.0.1", "-p", str(port)])
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port)).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            fill(("127.0.0.1", port), args.tubes)
            print(f"pipelined fetch, beanstalkd:   {ms(fetch_times(('127.0.0.1', port), 5))}")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
