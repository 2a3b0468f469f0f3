#!/usr/bin/env python3
"""TLS throughput beside plain TCP: one beanpole server listening on both, the load
generator (``rust/bench``, ``--tls-ca`` for TLS) run against each in turn, alternating
plain and TLS run by run, then the medians and the TLS/plain ratio.

    python bench/tls_bench.py                        # 5 pairs of each load
    python bench/tls_bench.py --pairs 3 --jobs 100000
    python bench/tls_bench.py --bench target/debug/beanpole-bench --no-build --pairs 1 --jobs 200

The certificates (a CA and a server certificate for 127.0.0.1) are made with ``openssl`` in a
temporary directory. Every run gets a fresh server. Loads: puts with 100-byte bodies from
``--connections`` connections, pipelined (``--pipeline`` commands per write) and one at a
time; and ``rt`` (a producer and a consumer at once, latency put -> RESERVED). Then
``beanpole.Client`` itself: one ``put_many`` of ``--jobs`` 100-byte bodies from this
process over one connection, plain and with ``tls=True`` (the native client's rustls),
and plain and with ``tls=<ssl.SSLContext>`` (Python's ssl behind the relay thread).
``--client-only`` runs just those (no load generator needed).
"""

from __future__ import annotations

import argparse
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launch import nofile_limit
from runner import build_bench, run_bench
from scenarios import ROOT

READY_TIMEOUT = 30.0
LISTENING = re.compile(r"listening on (.+?)(?:; log: .*)?$")


@dataclass(frozen=True)
class Endpoint:
    """What ``runner.run_bench`` needs of a server: its port and pid."""

    port: int
    pid: int


def openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def make_certs(d: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) for 127.0.0.1 and localhost."""
    ca, ca_key = d / "ca.pem", d / "ca.key"
    cert, key, csr, ext = d / "server.pem", d / "server.key", d / "server.csr", d / "ext"
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    openssl(
        "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2",
        "-subj", "/CN=beanpole bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    openssl("req", "-new", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    ext.write_text(
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\n"
    )
    openssl(
        "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext,
    )  # fmt: skip
    return ca, cert, key


def start_server(
    cert: Path, key: Path, extra: Sequence[str]
) -> tuple[subprocess.Popen[str], int, int]:
    """``beanpole serve`` on a plain and a TLS port; (process, plain port, TLS port)."""
    cmd = [
        sys.executable, "-m", "beanpole", "serve", "-l", "127.0.0.1:0", "-l", "tls:127.0.0.1:0",
        "--tls-cert", str(cert), "--tls-key", str(key), *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, cwd=ROOT,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=READY_TIMEOUT)
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            proc.wait()
            raise RuntimeError("beanpole did not report listening")
        m = LISTENING.search(line)
        if m:
            plain, tls = (int(a.rpartition(":")[2]) for a in m.group(1).split(", "))
            return proc, plain, tls


#: The loads run through ``beanpole.Client`` instead of the load generator: TLS from
#: files (rustls), and from an ``ssl.SSLContext`` (the relay); one ``put_many``, or
#: single puts (a tenth as many), where the relay's hand-offs show.
CLIENT_LOAD = "Client put_many"
CONTEXT_LOAD = "Client ctx put_many"
CLIENT_PUT = "Client put"
CONTEXT_PUT = "Client ctx put"
CLIENT_LOADS = (CLIENT_LOAD, CONTEXT_LOAD, CLIENT_PUT, CONTEXT_PUT)


def client_run(
    port: int, ca: Path | None, jobs: int, context: bool = False, single: bool = False
) -> dict[str, Any]:
    """One ``put_many`` of ``jobs`` 100-byte bodies through ``beanpole.Client`` (or with
    ``single`` ``jobs // 10`` puts one by one), plain or (with ``ca``) TLS, from files
    or (``context``) an ``ssl.SSLContext``; the same keys as a load generator result."""
    import ssl

    import beanpole

    if single:
        jobs = max(1, jobs // 10)
    bodies = [b"x" * 100] * jobs
    tls: dict[str, Any] = {}
    if ca is not None and context:
        tls = {"tls": ssl.create_default_context(cafile=ca)}
    elif ca is not None:
        tls = {"tls": True, "ca": ca}
    with beanpole.Client(("127.0.0.1", port), encoding=None, timeout=30, **tls) as c:
        started = time.perf_counter()
        ids = [c.put(b) for b in bodies] if single else c.put_many(bodies)
        elapsed = time.perf_counter() - started
    assert len(ids) == jobs
    return {"ops_per_s": jobs / elapsed, "p50_us": None, "server_cpu_us_per_op": None}


def loads(args: argparse.Namespace) -> dict[str, list[str]]:
    if args.client_only:
        return {name: [] for name in CLIENT_LOADS}
    jobs = ["--jobs", str(args.jobs), "--body-size", "100"]
    conns = str(args.connections)
    return {
        f"put c{conns} p{args.pipeline}": [
            "put", "--connections", conns, "--pipeline", str(args.pipeline), *jobs,
        ],
        f"put c{conns} p1": ["put", "--connections", conns, "--pipeline", "1", *jobs],
        "rt 1+1 p1": ["rt", "--producers", "1", "--consumers", "1", *jobs],
        **{name: [] for name in CLIENT_LOADS},
    }  # fmt: skip


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--pairs", type=int, default=5, help="plain/TLS run pairs per load [5]")
    p.add_argument("--jobs", type=int, default=200_000, help="jobs per run [200000]")
    p.add_argument("--connections", type=int, default=10, help="put connections [10]")
    p.add_argument("--pipeline", type=int, default=16, help="pipelined put depth [16]")
    p.add_argument("--bench", type=Path, help="load generator binary (default: release build)")
    p.add_argument("--no-build", action="store_true", help="do not build the load generator")
    p.add_argument("--server-arg", action="append", default=[], help="extra beanpole flag")
    p.add_argument(
        "--client-only", action="store_true", help="only the beanpole.Client put_many loads"
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    bench = None
    if not args.client_only:
        bench = args.bench if args.bench is not None else build_bench(args.no_build)
    nofile_limit()
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="beanpole-tls-bench-") as tmp:
        ca, cert, key = make_certs(Path(tmp))
        for name, load in loads(args).items():
            for pair in range(args.pairs):
                # Alternate which goes first, so drift favours neither.
                order = ("plain", "tls") if pair % 2 == 0 else ("tls", "plain")
                for mode in order:
                    # A fresh server (with both listeners) for every run: no run sees
                    # the jobs an earlier one left.
                    proc, plain_port, tls_port = start_server(cert, key, args.server_arg)
                    try:
                        port = plain_port if mode == "plain" else tls_port
                        extra = ["--tls-ca", str(ca)] if mode == "tls" else []
                        server = Endpoint(port, proc.pid)
                        if name in CLIENT_LOADS:
                            tls_ca = ca if mode == "tls" else None
                            result = client_run(
                                port, tls_ca, args.jobs, "ctx" in name, name.endswith(" put")
                            )
                            code, err = 0, ""
                        else:
                            code, result, err = run_bench(bench, [*load, *extra], server)  # type: ignore[arg-type]
                    finally:
                        proc.send_signal(signal.SIGTERM)
                        proc.wait(timeout=30)
                    if code != 0 or result is None:
                        print(f"{name} {mode}: failed ({code}): {err}", file=sys.stderr)
                        return 1
                    results.setdefault((name, mode), []).append(result)
                    print(
                        f"  {name:<19} {mode:<5} pair {pair + 1}: "
                        f"{result['ops_per_s']:>10.0f} ops/s  p50 {result['p50_us']} us",
                        file=sys.stderr,
                    )
    print(f"{'load':<19} {'mode':<5} {'ops/s':>10} {'p50 us':>8} {'srv us/op':>9} {'TLS/plain':>9}")
    for name in loads(args):
        medians = {}
        for mode in ("plain", "tls"):
            rs = results[(name, mode)]
            ops = statistics.median(r["ops_per_s"] for r in rs)
            p50s = [r["p50_us"] for r in rs if r["p50_us"] is not None]
            p50_text = f"{statistics.median(p50s):>8.0f}" if p50s else f"{'-':>8}"
            cpu = [r["server_cpu_us_per_op"] for r in rs if r["server_cpu_us_per_op"] is not None]
            medians[mode] = ops
            ratio = f"{ops / medians['plain']:>9.2f}" if mode == "tls" else ""
            cpu_text = f"{statistics.median(cpu):>9.2f}" if cpu else f"{'-':>9}"
            print(f"{name:<19} {mode:<5} {ops:>10.0f} {p50_text} {cpu_text} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
