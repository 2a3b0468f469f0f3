#!/usr/bin/env python3
"""The HTTP endpoint under hostile clients: 1,000 slow clients (each sends part of a
request head and never finishes it, connected all at once, reconnected when closed)
and a 10 MB header flood, while a scraper keeps getting ``/metrics`` and the load
generator keeps the queue busy; against the same without the abuse, side by side.

One ``beanpole serve --http`` child; each round runs three phases, in turn
(``--seconds`` each): not scraped, scraped (20 scrapes a second), scraped and abused
(the attack runs in a process of its own). Reports, per kind of phase: the scraper's
latency (median, p99, max) and failures, the queue's round trips per second
(``beanpole-bench rt``), the server's threads, resident memory (highest seen) and CPU,
and the endpoint's counters. ``--package DIR`` runs the server from another copy of
the package (e.g. an older build, to compare HTTP stacks).

    cargo build --release -p beanpole-bench
    python3 bench/http_abuse.py --rounds 3 --seconds 5

The pieces (:class:`Target`, :class:`Attack`, :class:`Scraper`, :class:`Sampler`) are
also used by tests/test_http_abuse.py.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import http.client
import json
import os
import re
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 10.0
_PARTIAL = b"GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slow\r\n"


class Target:
    """``beanpole serve -p 0 --http 127.0.0.1:0 EXTRA`` as a child process; with
    ``package``, the beanpole package is imported from that directory instead."""

    def __init__(self, extra: Sequence[str] = (), package: Path | None = None) -> None:
        env = dict(os.environ)
        if package is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package),
                                                              env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "127.0.0.1:0",
             *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        self.queue: tuple[str, int] | None = None
        self.http: tuple[str, int] | None = None
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if m := re.search(r"listening on (\d+\.\d+\.\d+\.\d+):(\d+)", line):
                self.queue = (m.group(1), int(m.group(2)))
            if m := re.search(r"metrics on http://([\d.]+):(\d+)/", line):
                self.http = (m.group(1), int(m.group(2)))
            if self.queue and self.http:
                break
        if not (self.queue and self.http):
            self.proc.kill()
            raise RuntimeError("beanpole serve did not start")
        # Read the rest of stderr, so the server never blocks on it.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def _status(self, key: str) -> int:
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        m = re.search(rf"^{key}:\s+(\d+)", text, re.M)
        return int(m.group(1)) if m else 0

    def threads(self) -> int:
        return self._status("Threads")

    def rss(self) -> int:
        """Resident memory in bytes."""
        return self._status("VmRSS") * 1024

    def cpu_seconds(self) -> float:
        """User and system CPU time of the server so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def http_counters(self) -> dict[str, float]:
        """The ``beanpole_http_*`` series of ``/metrics``."""
        assert self.http is not None
        body = scrape(self.http)[1]
        return {
            line.split(" ")[0]: float(line.split(" ")[1])
            for line in body.decode().splitlines()
            if line.startswith("beanpole_http_")
        }

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=TIMEOUT)


def scrape(address: tuple[str, int]) -> tuple[int, bytes]:
    """One GET /metrics on a new connection: status and body."""
    conn = http.client.HTTPConnection(*address, timeout=TIMEOUT)
    try:
        conn.request("GET", "/metrics")
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


class _Worker:
    """A daemon thread running ``_run`` until :meth:`stop`."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join(TIMEOUT + 5)

    def _run(self) -> None:
        raise NotImplementedError


class Slowloris(_Worker):
    """``clients`` connections opened at once, each sending part of a request head and
    never the end; every ``period`` seconds one more header line goes to each, and the
    ones the server closed (or refused) are opened again, all at once."""

    def __init__(self, address: tuple[str, int], clients: int = 1000, period: float = 0.5):
        super().__init__()
        self.address = address
        self.clients = clients
        self.period = period
        self.connects = 0
        self.closed_by_server = 0
        self.burst_done = threading.Event()

    def _open(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        self.connects += 1
        if sock.connect_ex(self.address) not in (0, errno.EINPROGRESS):
            sock.close()
            self.closed_by_server += 1
            return
        selector.register(sock, selectors.EVENT_WRITE, "connecting")

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for _ in range(self.clients):
            self._open(selector)
        next_tick = time.monotonic() + self.period
        while not self.stopping.is_set():
            for key, _events in selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    if key.data == "connecting":
                        sock.send(_PARTIAL)
                        selector.modify(sock, selectors.EVENT_READ, "open")
                        continue
                    if sock.recv(4096):
                        continue  # an answer (408): the close follows
                except OSError:
                    pass
                selector.unregister(sock)
                sock.close()
                self.closed_by_server += 1
            if time.monotonic() >= next_tick:
                next_tick += self.period
                self.burst_done.set()
                for key in list(selector.get_map().values()):
                    if key.data == "open":
                        with contextlib.suppress(OSError):
                            key.fileobj.send(b"X-Slow: 1\r\n")  # type: ignore[union-attr]
                for _ in range(self.clients - len(selector.get_map())):
                    self._open(selector)
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()
        self.burst_done.set()


class Flood(_Worker):
    """Request heads of ``size`` bytes (one endless header), on a new connection every
    ``period`` seconds; counts the bytes sent before the server closed each."""

    def __init__(
        self, address: tuple[str, int], size: int = 10 * 1024 * 1024, period: float = 0.1
    ) -> None:
        super().__init__()
        self.address = address
        self.size = size
        self.period = period
        self.floods = 0
        self.sent = 0

    def _run(self) -> None:
        chunk = b"a" * 65536
        while not self.stopping.wait(self.period):
            try:
                with socket.create_connection(self.address, timeout=TIMEOUT) as sock:
                    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Flood: ")
                    sent = 0
                    while sent < self.size and not self.stopping.is_set():
                        sock.sendall(chunk)
                        sent += len(chunk)
                        self.sent += len(chunk)
            except OSError:
                pass  # cut by the server, as it should be
            self.floods += 1


class Scraper(_Worker):
    """GET /metrics every ``interval`` seconds on a new connection; the latency of
    each success and the reason of each failure."""

    def __init__(self, address: tuple[str, int], interval: float = 0.05) -> None:
        super().__init__()
        self.address = address
        self.interval = interval
        self.latencies: list[float] = []
        self.failures: list[str] = []

    def _run(self) -> None:
        while not self.stopping.wait(self.interval):
            t0 = time.perf_counter()
            try:
                status, body = scrape(self.address)
            except OSError as err:
                self.failures.append(f"{type(err).__name__}: {err}")
                continue
            if status != 200 or b"beanpole_jobs" not in body:
                self.failures.append(f"status {status}")
                continue
            self.latencies.append(time.perf_counter() - t0)


class Sampler(_Worker):
    """The target's threads and resident memory every 50 ms: the highest of each."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target
        self.threads = target.threads()
        self.rss = target.rss()

    def _run(self) -> None:
        while not self.stopping.wait(0.05):
            with contextlib.suppress(OSError):
                self.threads = max(self.threads, self.target.threads())
                self.rss = max(self.rss, self.target.rss())


# -- the bench ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="quiet and abused phases each [3]")
    p.add_argument("--seconds", type=float, default=5.0, help="length of a phase [5]")
    p.add_argument("--clients", type=int, default=1000, help="slow clients [1000]")
    p.add_argument("--flood-mb", type=int, default=10, help="size of a flooding head [10]")
    p.add_argument("--load", default="rt --producers 4 --consumers 4 --pipeline 16",
                   help="beanpole-bench arguments for the queue's load, quoted")
    p.add_argument("--bench", type=Path, default=ROOT / "target/release/beanpole-bench")
    p.add_argument("--package", type=Path, metavar="DIR",
                   help="run the server from the beanpole package in DIR (another build)")
    p.add_argument("--no-abuse", action="store_true",
                   help="only the unscraped and scraped phases")
    p.add_argument("--attack", metavar="HOST:PORT",
                   help="only attack this endpoint until stdin closes (see Attack)")
    return p.parse_args(argv)


class Attack:
    """The slow clients and the flood in a process of their own (``--attack``), so
    the scraper measured beside them does not share their interpreter lock."""

    def __init__(self, address: tuple[str, int], clients: int, flood_mb: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--attack", f"{address[0]}:{address[1]}",
             "--clients", str(clients), "--flood-mb", str(flood_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "attacking":
            self.proc.kill()
            raise RuntimeError(f"the attack did not start: {line!r}")

    def stop(self) -> dict[str, int]:
        """End the attack; what it did (connects, closed by the server, floods)."""
        out, _ = self.proc.communicate(timeout=TIMEOUT * 3)
        return dict(json.loads(out.strip().splitlines()[-1]))


def attack(address: tuple[str, int], clients: int, flood_mb: int) -> int:
    """The ``--attack`` process: attack until stdin closes, then print the counts."""
    slow = Slowloris(address, clients)
    flood = Flood(address, flood_mb * 1024 * 1024)
    slow.start()
    flood.start()
    slow.burst_done.wait(TIMEOUT)
    print("attacking", flush=True)
    sys.stdin.read()
    slow.stop()
    flood.stop()
    print(json.dumps({"connects": slow.connects, "closed_by_server": slow.closed_by_server,
                      "floods": flood.floods, "flood_bytes": flood.sent}))  # fmt: skip
    return 0


UNSCRAPED, SCRAPED, ABUSED = "not scraped", "scraped", "scraped + abused"


@dataclass
class Phase:
    kind: str
    latencies: list[float]
    failures: list[str]
    ops_per_s: float
    threads: int
    rss: int
    attack: dict[str, int]
    #: The server's CPU seconds per second of the phase.
    cpu: float


def run_phase(target: Target, args: argparse.Namespace, kind: str) -> Phase:
    assert target.http is not None and target.queue is not None
    attacker = Attack(target.http, args.clients, args.flood_mb) if kind == ABUSED else None
    sampler = Sampler(target)
    scraper = Scraper(target.http)
    sampler.start()
    if kind != UNSCRAPED:
        scraper.start()
    cpu = target.cpu_seconds()
    cmd = [str(args.bench), *args.load.split(), "--duration", str(args.seconds),
           "--host", target.queue[0], "--port", str(target.queue[1]),
           "--server-pid", str(target.proc.pid)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.seconds + 120)
    cpu = target.cpu_seconds() - cpu
    scraper.stop()
    sampler.stop()
    done = attacker.stop() if attacker is not None else {}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"beanpole-bench failed: {proc.stderr.strip()[-500:]}")
    result = json.loads(lines[-1])
    return Phase(kind, scraper.latencies, scraper.failures, float(result["ops_per_s"]),
                 sampler.threads, sampler.rss, done, cpu / result["seconds"])  # fmt: skip


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3:.1f}"


def report(phases: list[Phase], counters: dict[str, float], args: argparse.Namespace) -> None:
    rows = []
    kinds = [k for k in (UNSCRAPED, SCRAPED, ABUSED) if any(p.kind == k for p in phases)]
    for kind in kinds:
        group = [p for p in phases if p.kind == kind]
        lat = [x for p in group for x in p.latencies]
        name = kind
        if kind == ABUSED:
            name = f"scraped + {args.clients} slow clients + {args.flood_mb} MB floods"
        rows.append((
            name,
            len(lat), sum(len(p.failures) for p in group), _ms(lat, 0.5), _ms(lat, 0.99),
            _ms(lat, 1.0), statistics.median(p.ops_per_s for p in group),
            max(p.threads for p in group), max(p.rss for p in group) / 2**20,
            statistics.median(p.cpu for p in group),
        ))  # fmt: skip
    print(f"| phase ({args.rounds} x {args.seconds:g} s) | scrapes ok | failed | "
          "scrape p50 ms | p99 ms | max ms | queue rt/s (median) | server threads (max) "
          "| RSS MiB (max) | server CPU s/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:,.0f} | "
              f"{r[7]} | {r[8]:.1f} | {r[9]:.2f} |")
    print()
    for r in rows[1:]:
        print(f"queue throughput, {r[0]} / {rows[0][0]}: {r[6] / rows[0][6]:.2f}x")
    shown = ", ".join(f"{k.removeprefix('beanpole_http_')} {v:g}" for k, v in counters.items())
    print(f"endpoint counters after the run: {shown}")
    attacks = [p.attack for p in phases if p.kind == ABUSED]
    if attacks:
        total = {k: sum(a.get(k, 0) for a in attacks) for k in attacks[0]}
        print("attack in all: " + ", ".join(f"{k} {v:,}" for k, v in total.items()))
    for p in phases:
        for failure in p.failures[:5]:
            print(f"failed scrape ({p.kind}): {failure}")


def _nofile() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _nofile()
    if args.attack:
        host, _, port = args.attack.rpartition(":")
        return attack((host, int(port)), args.clients, args.flood_mb)
    if not args.bench.exists():
        print(f"{args.bench} is missing: cargo build --release -p beanpole-bench", file=sys.stderr)
        return 2
    target = Target(package=args.package)
    kinds = [UNSCRAPED, SCRAPED] + ([] if args.no_abuse else [ABUSED])
    try:
        phases = []
        for i in range(args.rounds):
            for kind in kinds if i % 2 == 0 else kinds[::-1]:
                phases.append(run_phase(target, args, kind))
        report(phases, target.http_counters(), args)
    finally:
        target.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
