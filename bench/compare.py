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
import os
import platform
import queue
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("beanpole", "beanstalkd")
A, B = KINDS
READY_TIMEOUT = 30.0  # seconds for a server to say it is listening
LISTENING = re.compile(r"listening on (\S+):(\d+)\s*$")
BIG_JOB = "65536"  # max job size both servers get for the 64 KiB scenario


# -- what is measured ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A target from issue 4: ``ratio(metric) op value`` (ratio = beanpole / beanstalkd)."""

    metric: str
    op: str  # ">=" or "<="
    value: float

    def met(self, ratio: float | None) -> bool | None:
        if ratio is None:
            return None
        return ratio >= self.value if self.op == ">=" else ratio <= self.value

    def text(self) -> str:
        return f"{LABELS[self.metric]} {'≥' if self.op == '>=' else '≤'} {self.value:g}x"


LABELS = {
    "ops_per_s": "ops/s",
    "p50_us": "p50",
    "p99_us": "p99",
    "server_cpu_us_per_op": "server CPU/op",
    "bytes_per_job": "bytes per job",
}


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    args: tuple[str, ...]  # bench arguments (duration or counts are added per mode)
    full: tuple[str, ...]  # extra arguments of a full run
    quick: tuple[str, ...]  # extra arguments of a --quick run
    unit: str = "jobs/s"
    server_args: tuple[str, ...] = ()  # flags for both servers (same meaning in both)
    targets: tuple[Target, ...] = ()


FULL_SECONDS = "5"
QUICK_SECONDS = "1"
RT = ("--producers", "10", "--consumers", "10")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "rt16",
        "rt, 10 producers + 10 consumers, pipeline 16",
        ("rt", *RT, "--pipeline", "16"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("server_cpu_us_per_op", "<=", 0.5), Target("ops_per_s", ">=", 1.5)),
    ),
    Scenario(
        "rt1",
        "rt, 10 + 10, pipeline 1",
        ("rt", *RT, "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("ops_per_s", ">=", 1.3),),
    ),
    Scenario(
        "put1",
        "put, 1 connection, pipeline 1",
        ("put", "--connections", "1", "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        unit="puts/s",
        targets=(Target("p50_us", "<=", 1.0), Target("p99_us", "<=", 1.0)),
    ),
    Scenario(
        "rd100",
        "reserve-delete, 100 connections, pipeline 1",
        ("reserve-delete", "--connections", "100", "--pipeline", "1"),
        ("--jobs", "100000"),
        ("--jobs", "20000"),
        targets=(Target("ops_per_s", ">=", 1.3),),
    ),
    Scenario(
        "tubes1000",
        "many-tubes, 1000 tubes (10 + 10, pipeline 1)",
        ("many-tubes", *RT, "--pipeline", "1", "--tubes", "1000"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        targets=(Target("ops_per_s", ">=", 3.0),),
    ),
    Scenario(
        "tubes1",
        "many-tubes, 1 tube (the same load, for the drop)",
        ("many-tubes", *RT, "--pipeline", "1", "--tubes", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
    ),
    Scenario(
        "big",
        "big (64 KiB), 10 connections (5 + 5)",
        ("big", "--connections", "10", "--pipeline", "1"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        server_args=("-z", BIG_JOB),
        targets=(Target("ops_per_s", ">=", 1.5),),
    ),
    Scenario(
        "storm",
        "storm, 50 at once",
        ("storm", "--connections", "50"),
        ("--duration", FULL_SECONDS),
        ("--duration", QUICK_SECONDS),
        unit="connections/s",
        targets=(Target("ops_per_s", ">=", 1.5),),
    ),
    Scenario(
        "delayed",
        "delayed 1 s, 2 + 2, 1000 puts/s (latency = lateness)",
        ("delayed", "--producers", "2", "--consumers", "2", "--delay", "1", "--rate", "1000"),
        ("--jobs", "5000"),
        ("--jobs", "1000"),
    ),
)
MEMORY_TARGET = Target("bytes_per_job", "<=", 0.5)
MEMORY_JOBS = {"full": 1_000_000, "quick": 200_000}
IDLE_CONNECTIONS = {"full": 10_000, "quick": 2_000}
ALL_KEYS = [s.key for s in SCENARIOS] + ["memory"]


# -- servers ---------------------------------------------------------------------------------


def nofile_limit() -> int:
    """Raise our soft open-file limit to the hard one (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def beanpole_command(extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "beanpole", "serve", "-l", "127.0.0.1", "-p", "0", *extra]


def beanstalkd_command(exe: str, port: int, extra: Sequence[str], nofile: int) -> list[str]:
    flags = " ".join([exe, "-l", "127.0.0.1", "-p", str(port), *extra])
    return ["sh", "-c", f"ulimit -n {nofile}; LISTEN_PID=$$ LISTEN_FDS=1 exec {flags}"]


@dataclass
class Server:
    kind: str
    proc: subprocess.Popen[str]
    port: int
    log: deque[str] = field(default_factory=lambda: deque(maxlen=50))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_bytes(self) -> int:
        """Resident set size from /proc/PID/status (VmRSS)."""
        text = Path(f"/proc/{self.pid}/status").read_text()
        m = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
        if m is None:
            raise RuntimeError(f"no VmRSS for {self.kind} (pid {self.pid})")
        return int(m.group(1)) * 1024

    def ping(self) -> None:
        """One round trip, so the process is fully started (not still the `sh` before
        `exec`) before its RSS is read."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=READY_TIMEOUT) as s:
            s.sendall(b"list-tube-used\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = s.recv(256)
                if not chunk:
                    break
                reply += chunk
        if reply != b"USING default\r\n":
            raise RuntimeError(f"{self.kind} answered {reply!r} to list-tube-used")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if self.kind == A else signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.log.append("did not stop within 10 s of SIGTERM; killed")
                self.proc.kill()
                self.proc.wait(timeout=10)


def _drain(stream: Any, lines: queue.Queue[str | None], log: deque[str]) -> None:
    for line in stream:
        log.append(line.rstrip("\n"))
        lines.put(line)
    lines.put(None)


def start_beanpole(extra: Sequence[str]) -> Server:
    proc = subprocess.Popen(
        beanpole_command(extra),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    log: deque[str] = deque(maxlen=50)
    lines: queue.Queue[str | None] = queue.Queue()
    # Read stderr on a thread for the whole run, so the server can never block on it.
    threading.Thread(target=_drain, args=(proc.stderr, lines, log), daemon=True).start()
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        left = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(left, 0.001))
        except queue.Empty:
            line = None
            left = 0
        if line is None or left <= 0:
            proc.kill()
            proc.wait()
            raise RuntimeError("beanpole did not report listening: " + " | ".join(log))
        m = LISTENING.search(line)
        if m:
            return Server(A, proc, int(m.group(2)), log)


def start_beanstalkd(extra: Sequence[str], nofile: int) -> Server:
    exe = shutil.which("beanstalkd")
    if exe is None:
        raise RuntimeError("beanstalkd is not installed (apt-get install beanstalkd)")
    # A socket bound and listening before the process starts (systemd socket activation on
    # fd 3): clients can connect at once, no readiness to poll for.
    # beanstalkd sets these options on the socket it makes itself, and takes a socket it is
    # handed as already set up: without TCP_NODELAY (which accepted sockets inherit) its
    # one-reply-per-write output meets Nagle's algorithm and stalls for hundreds of ms.
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    lsock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    lsock.setblocking(False)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1024)  # beanstalkd's own backlog
    port = lsock.getsockname()[1]
    fd = lsock.fileno()

    def in_child() -> None:
        # The socket must be fd 3 and survive exec. (pass_fds would not do: it keeps the
        # socket's own number open, and closes fd 3 after this runs.)
        if fd == 3:
            os.set_inheritable(3, True)
        else:
            os.dup2(fd, 3, inheritable=True)

    try:
        proc = subprocess.Popen(
            beanstalkd_command(exe, port, extra, nofile),
            close_fds=False,  # Python's own descriptors are not inheritable anyway
            preexec_fn=in_child,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        lsock.close()
    log: deque[str] = deque(maxlen=50)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stderr, lines, log), daemon=True).start()
    return Server(B, proc, port, log)


def start_server(kind: str, extra: Sequence[str], nofile: int) -> Server:
    return start_beanpole(extra) if kind == A else start_beanstalkd(extra, nofile)


# -- runs ------------------------------------------------------------------------------------


@dataclass
class Run:
    scenario: str
    kind: str
    pair: int
    result: dict[str, Any] | None
    code: int
    problem: str = ""
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.result is not None

    def value(self, metric: str) -> float | None:
        if metric in self.extra:
            return self.extra[metric]
        if self.result is None:
            return None
        v = self.result.get(metric)
        return float(v) if isinstance(v, int | float) else None


def bench_command(bench: Path, args: Sequence[str], server: Server | None) -> list[str]:
    cmd = [str(bench), *args, "--host", "127.0.0.1"]
    if server is None:
        return [*cmd, "--port", "PORT", "--server-pid", "PID"]
    return [*cmd, "--port", str(server.port), "--server-pid", str(server.pid)]


def time_limit(args: Sequence[str]) -> float:
    """An upper bound for one bench run (its own --timeout is the first line of defence)."""
    if "--duration" in args:
        return float(args[args.index("--duration") + 1]) + 180.0
    return 600.0


def run_bench(
    bench: Path, args: Sequence[str], server: Server
) -> tuple[int, dict[str, Any] | None, str]:
    cmd = bench_command(bench, [*args, "--timeout", str(int(time_limit(args)) - 60)], server)
    try:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=time_limit(args),
        )
    except subprocess.TimeoutExpired:
        return -1, None, f"no result within {time_limit(args):.0f} s"
    result = None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if lines:
        try:
            result = json.loads(lines[-1])
        except json.JSONDecodeError:
            result = None
    return proc.returncode, result, proc.stderr.strip()


def describe_problem(code: int, err: str, server: Server) -> str:
    parts = [f"exit status {code}"]
    if err:
        parts.append("load generator: " + " / ".join(err.splitlines()[:8]))
    server_lines = [ln for ln in server.log if "listening on" not in ln]
    if server.proc.poll() not in (None, -signal.SIGTERM, -signal.SIGKILL, 0):
        parts.append(f"server exited with status {server.proc.returncode}")
    if server_lines:
        parts.append("server stderr: " + " / ".join(server_lines[-5:]))
    return "; ".join(parts)


def run_scenario(sc: Scenario, pair: int, kind: str, bench: Path, mode: str, nofile: int) -> Run:
    args = [*sc.args, *(sc.full if mode == "full" else sc.quick)]
    server = start_server(kind, sc.server_args, nofile)
    try:
        code, result, err = run_bench(bench, args, server)
        problem = "" if code == 0 and result is not None else describe_problem(code, err, server)
    finally:
        server.stop()
    return Run(sc.key, kind, pair, result, code, problem)


def memory_run(pair: int, kind: str, bench: Path, mode: str, nofile: int) -> Run:
    """Bytes per ready job beyond its body, and bytes per idle connection."""
    jobs = MEMORY_JOBS[mode]
    conns = IDLE_CONNECTIONS[mode]
    extra: dict[str, float] = {}
    problems: list[str] = []
    server = start_server(kind, (), nofile)
    try:
        server.ping()
        before = server.rss_bytes()
        args = [
            "put",
            "--jobs",
            str(jobs),
            "--connections",
            "4",
            "--pipeline",
            "64",
            "--body-size",
            "100",
        ]
        code, result, err = run_bench(bench, args, server)
        after = server.rss_bytes()
        if code == 0 and result is not None:
            extra["bytes_per_job"] = (after - before) / jobs - 100
            extra["rss_jobs_mb"] = after / 1e6
            extra["rss_idle_mb"] = before / 1e6
        else:
            problems.append("jobs: " + describe_problem(code, err, server))
    finally:
        server.stop()
    server = start_server(kind, (), nofile)
    try:
        server.ping()
        before = server.rss_bytes()
        cmd = bench_command(bench, ["idle", "--connections", str(conns), "--hold", "120"], server)
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdin is not None
        line = _readline_within(proc.stdout, 120.0)
        after = server.rss_bytes()
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        if line and proc.returncode == 0:
            extra["bytes_per_conn"] = (after - before) / conns
        else:
            problems.append("idle: " + describe_problem(proc.returncode, err, server))
    finally:
        server.stop()
    ok = "bytes_per_job" in extra and "bytes_per_conn" in extra
    return Run(
        "memory",
        kind,
        pair,
        {"ok": True} if ok else None,
        0 if ok else 1,
        "; ".join(problems),
        extra,
    )


def _readline_within(stream: Any, seconds: float) -> str:
    box: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: box.put(stream.readline()), daemon=True).start()
    try:
        return box.get(timeout=seconds)
    except queue.Empty:
        return ""


# -- summaries -------------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def medians(runs: Sequence[Run], key: str, kind: str, metric: str) -> float | None:
    vals = [
        v
        for r in runs
        if r.scenario == key and r.kind == kind and r.ok
        for v in [r.value(metric)]
        if v is not None
    ]
    return median(vals)


def pair_ratio(runs: Sequence[Run], key: str, metric: str) -> float | None:
    """Median over pairs of beanpole / beanstalkd (pairs where both runs succeeded)."""
    by_pair: dict[int, dict[str, float]] = {}
    for r in runs:
        v = r.value(metric) if r.scenario == key and r.ok else None
        if v is not None:
            by_pair.setdefault(r.pair, {})[r.kind] = v
    ratios = [p[A] / p[B] for p in by_pair.values() if A in p and B in p and p[B] > 0]
    return median(ratios)


def fmt(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "—"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def fmt_ratio(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}x"


def verdict(ok: bool | None) -> str:
    return {True: "met", False: "**not met**", None: "no data"}[ok]


# -- the report ------------------------------------------------------------------------------


def sh(cmd: Sequence[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


def machine() -> list[tuple[str, str]]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        if m:
            mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    try:
        from beanpole import __version__ as bp_version
    except ImportError:
        bp_version = "?"
    commit = sh(["git", "-C", str(ROOT), "describe", "--always", "--dirty"])
    return [
        ("cores (`nproc`)", sh(["nproc"])),
        ("CPU", cpu),
        ("memory", mem),
        ("kernel", platform.release()),
        ("beanstalkd", sh(["beanstalkd", "-v"])),
        ("beanpole", f"{bp_version} (git {commit})"),
        ("rustc", sh(["rustc", "--version"])),
        ("python", platform.python_version()),
    ]


METHOD = """\
**Servers.** Every run gets a fresh server process on 127.0.0.1: beanpole as
`python -m beanpole serve -l 127.0.0.1 -p 0` (the run starts once it prints its
`listening on` line), Debian's beanstalkd with a socket that is already bound and
listening, handed over by systemd socket activation (`LISTEN_FDS=1`, fd 3), with
`ulimit -n` raised. Both keep their default settings, except a 64 KiB max job size
(`-z {big}`) for both in the `big` scenario. Neither is given a log directory (`-b`),
so neither writes to disk.

**Order.** For each scenario the servers alternate run by run, beanpole then beanstalkd
(A B A B …), {pairs} pairs. Absolute figures move with the load on this shared machine
(up to 2x between runs), so the figures that count are the **per-pair ratios**
beanpole / beanstalkd, summarised by their median; the tables also give the median of
each server's own runs.

**Load generator.** `beanpole-bench` (rust/bench) is a small Rust program with one client
thread running a current-thread tokio runtime: on these 2 cores that cost the least client
CPU per operation (rt 10 + 10, pipeline 16, against beanpole: 2.0 µs per job, against 2.4
with two such threads, 2.4 with a multi-thread runtime of one worker and 3.3 of two;
against beanstalkd 19.6, 22.5, 22.3 and 24.8 µs); `--threads` and `--runtime` change it.
With `--pipeline N` each connection writes N commands in one write, then reads the N
replies; replies are parsed in place from a reused buffer, with no allocation per command.
Every reply is checked against the command it answers (INSERTED with ids increasing per
connection, USING, WATCHING counts, RESERVED, DELETED, TIMED_OUT only where a drain
expects it). Bodies are self-describing: a header with the job's number, its send time and
a checksum, then a pattern chosen by the job number, padded to the body size; every
reserved body is verified, the id a job was reserved under must be the id its put got, and
no job may be reserved twice. Any error makes the run exit non-zero; such runs are listed
under *Problems* and left out of the medians.

**What an operation is.** `put`: an acknowledged put; latency is each put's round trip.
`reserve-delete`: a job reserved and deleted, from a queue pre-filled (not measured) with
the given number of jobs, until `reserve-with-timeout 0` finds it empty; latency is each
command's round trip (reserves and deletes alike). `rt`, `many-tubes`, `big`: a job
delivered (RESERVED) while producers and consumers run at once; consumers `reserve`
(blocking), then delete the batch; producers keep at most 2 x (producers + consumers) x
pipeline jobs put and not yet reserved, so the queue stays short and memory bounded; their
latency is end-to-end, from the put being written to RESERVED being read (it includes the
time a job waits in that short queue). In `many-tubes` every put is preceded by `use tI`,
I = job number mod K (also for K = 1, so both rows send the same commands), and consumers
watch all K tubes.
`storm`: one whole connection (connect, `use`, `put`, `quit`, the server closes); latency
is the whole cycle. `delayed`: lateness of RESERVED past the due time (send time + delay);
a job delivered before it is due is an error.

**Latency** percentiles come from a log-linear histogram (0.4 % resolution, fixed memory)
merged over all connections. **CPU**: the server's user + system time from
`/proc/PID/stat` (10 ms ticks) over the measured phase, divided by the operations; for
beanpole that is the whole `python -m beanpole serve` process (an idle interpreter plus
the Rust runtime). The client's from `getrusage`. Client and server share the 2 cores:
once (client + server CPU per operation) x ops/s nears 2 s per second the machine, not
the server, sets ops/s, so **server CPU per operation** is the steadier comparison.

**Memory.** Bytes per job: the server's RSS (`VmRSS` in `/proc/PID/status`) after
putting {jobs:,} ready 100-byte jobs (4 connections, pipeline 64), minus its RSS
before, divided by the jobs, minus the 100-byte body. Bytes per idle connection: the RSS
increase after opening {conns:,} connections that each answered one command
(`list-tube-used`) and stay open.
"""


def write_report(
    path: Path,
    chart: Path | None,
    runs: Sequence[Run],
    keys: Sequence[str],
    mode: str,
    pairs: int,
    bench: Path,
    elapsed: float,
    nofile: int,
) -> None:
    scen = {s.key: s for s in SCENARIOS}
    out: list[str] = []
    w = out.append
    w("# beanpole against beanstalkd")
    w("")
    w("<!-- Generated by bench/compare.py: change the generator, not this file. -->")
    w("")
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    quick = " — **quick mode: short runs, a fast look, not the figures that count**"
    w(
        f"Run of {when}: {pairs} pairs per scenario{quick if mode == 'quick' else ''}; "
        f"the whole run took {elapsed / 60:.1f} min. Ratios are beanpole / beanstalkd "
        "(median of the per-pair ratios)."
    )
    w("")

    w("## Targets (issue 4)")
    w("")
    w("| scenario | target | ratio | |")
    w("| --- | --- | --- | --- |")
    for key in keys:
        if key == "memory":
            r = pair_ratio(runs, "memory", "bytes_per_job")
            w(
                f"| memory, {MEMORY_JOBS[mode]:,} ready jobs | {MEMORY_TARGET.text()} | "
                f"{fmt_ratio(r)} | {verdict(MEMORY_TARGET.met(r))} |"
            )
            continue
        sc = scen[key]
        for t in sc.targets:
            r = pair_ratio(runs, key, t.metric)
            w(f"| {sc.title} | {t.text()} | {fmt_ratio(r)} | {verdict(t.met(r))} |")
        if key == "tubes1000" and "tubes1" in keys:
            own = {k: _own_ratio(runs, k) for k in KINDS}
            mine = own[A]
            ok = None if mine is None else mine >= 0.8
            w(
                f"| many-tubes, 1000 tubes vs 1 | beanpole keeps ≥ 0.8 of its 1-tube rate | "
                f"beanpole {fmt(own[A], 2)}, beanstalkd {fmt(own[B], 2)} | {verdict(ok)} |"
            )
    w("")
    w(
        "For the targets not met, the profiles that show where the time goes and what "
        "would move it are in [profiles.md](profiles.md) (written by hand)."
    )
    w("")

    w("## Results")
    w("")
    w("Medians of each server's runs; the ratio row is the median of the per-pair ratios.")
    w("")
    w(
        "| scenario | server | ops/s | p50 µs | p99 µs | server CPU µs/op | client CPU µs/op "
        "| good runs |"
    )
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in keys:
        if key == "memory":
            continue
        sc = scen[key]
        for kind in KINDS:
            good = sum(1 for r in runs if r.scenario == key and r.kind == kind and r.ok)
            total = sum(1 for r in runs if r.scenario == key and r.kind == kind)
            w(
                f"| {sc.title} ({sc.unit}) | {kind} "
                f"| {fmt(medians(runs, key, kind, 'ops_per_s'))} "
                f"| {fmt(medians(runs, key, kind, 'p50_us'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'p99_us'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'server_cpu_us_per_op'), 1)} "
                f"| {fmt(medians(runs, key, kind, 'client_cpu_us_per_op'), 1)} "
                f"| {good}/{total} |"
            )
        w(
            f"| | *ratio* | {fmt_ratio(pair_ratio(runs, key, 'ops_per_s'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'p50_us'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'p99_us'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'server_cpu_us_per_op'))} "
            f"| {fmt_ratio(pair_ratio(runs, key, 'client_cpu_us_per_op'))} | |"
        )
    w("")

    if "memory" in keys:
        w("## Memory")
        w("")
        w("| | beanpole | beanstalkd | ratio |")
        w("| --- | ---: | ---: | ---: |")
        rows = [
            (
                f"bytes per job beyond its body ({MEMORY_JOBS[mode]:,} ready 100-byte jobs)",
                "bytes_per_job",
                0,
            ),
            (f"RSS with {MEMORY_JOBS[mode]:,} ready jobs (MB)", "rss_jobs_mb", 1),
            ("RSS of the fresh server (MB)", "rss_idle_mb", 1),
            (
                f"bytes per idle connection ({IDLE_CONNECTIONS[mode]:,} connections)",
                "bytes_per_conn",
                0,
            ),
        ]
        for label, metric, digits in rows:
            w(
                f"| {label} | {fmt(medians(runs, 'memory', A, metric), digits)} "
                f"| {fmt(medians(runs, 'memory', B, metric), digits)} "
                f"| {fmt_ratio(pair_ratio(runs, 'memory', metric))} |"
            )
        w("")

    if chart is not None:
        w(f"![ops/s and p99 latency by scenario]({chart.name})")
        w("")

    w("## Method")
    w("")
    w(METHOD.format(big=BIG_JOB, pairs=pairs, jobs=MEMORY_JOBS[mode], conns=IDLE_CONNECTIONS[mode]))
    w("## Machine")
    w("")
    w("| | |")
    w("| --- | --- |")
    for k, v in machine():
        w(f"| {k} | {v} |")
    w("")

    w("## Exact commands")
    w("")
    w("```sh")
    w(f"python bench/compare.py {'--quick ' if mode == 'quick' else ''}--pairs {pairs}")
    w("# servers (a fresh one per run)")
    w(shlex.join(["python", *beanpole_command(["-z", BIG_JOB])[1:]]) + "   # -z: big only")
    stalk = shlex.join(beanstalkd_command("beanstalkd", 0, ["-z", BIG_JOB], nofile))
    w(stalk.replace("-p 0", "-p PORT") + "   # -z: big only; socket on fd 3 (TCP_NODELAY)")
    w("# load (PORT and PID of that server)")
    rel = bench.relative_to(ROOT) if bench.is_relative_to(ROOT) else bench
    for key in keys:
        if key == "memory":
            w(
                f"{rel} put --jobs {MEMORY_JOBS[mode]} --connections 4 --pipeline 64 "
                "--body-size 100 --host 127.0.0.1 --port PORT --server-pid PID"
            )
            w(
                f"{rel} idle --connections {IDLE_CONNECTIONS[mode]} --hold 120 "
                "--host 127.0.0.1 --port PORT --server-pid PID"
            )
            continue
        sc = scen[key]
        args = [*sc.args, *(sc.full if mode == "full" else sc.quick)]
        w(" ".join([str(rel), *bench_command(bench, args, None)[1:]]))
    w("```")
    w("")

    problems = [r for r in runs if not r.ok]
    w("## Problems")
    w("")
    if not problems:
        w("None: every run exited 0 with every reply and body as expected.")
    for bad in problems:
        w(f"- {bad.scenario}, pair {bad.pair + 1}, {bad.kind}: {bad.problem or f'exit {bad.code}'}")
    w("")
    # The write-ahead log section is the log suite's (bench/log_bench.py): keep it.
    from log_report import kept_block

    kept = kept_block(path.read_text()) if path.exists() else ""
    path.write_text("\n".join(out) + ("\n" + kept if kept else ""))


def _own_ratio(runs: Sequence[Run], kind: str) -> float | None:
    many = medians(runs, "tubes1000", kind, "ops_per_s")
    one = medians(runs, "tubes1", kind, "ops_per_s")
    return None if many is None or not one else many / one


def write_chart(path: Path, runs: Sequence[Run], keys: Sequence[str]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: no chart: matplotlib is missing (pip install matplotlib)", file=sys.stderr)
        return False
    # delayed's rate is fixed by the load, so its throughput says nothing: tables only.
    shown = [k for k in keys if k not in ("memory", "delayed")]
    if not shown:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    width = 0.4
    colors = {A: "#2a7ab9", B: "#c8553d"}
    xs = list(range(len(shown)))
    for ax, metric, title in (
        (axes[0], "ops_per_s", "throughput (ops/s, median; log scale)"),
        (axes[1], "p99_us", "p99 latency (µs, median; log scale)"),
    ):
        for i, kind in enumerate(KINDS):
            vals = [medians(runs, k, kind, metric) or 0.0 for k in shown]
            pos = [x + (i - 0.5) * width for x in xs]
            ax.bar(pos, vals, width, label=kind, color=colors[kind])
        ax.set_yscale("log")
        ax.set_xticks(xs)
        ax.set_xticklabels(shown, rotation=30, ha="right")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("beanpole vs beanstalkd, same machine, alternating runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- main ------------------------------------------------------------------------------------


def build_bench(no_build: bool) -> Path:
    cargo = shutil.which("cargo")
    if not no_build:
        if cargo is None:
            sys.exit("compare: cargo is not installed (or use --bench PATH --no-build)")
        subprocess.run(
            [cargo, "build", "--release", "-q", "-p", "beanpole-bench"],
            cwd=ROOT,
            check=True,
            timeout=1800,
        )
    target = ROOT / "target"
    if cargo is not None:
        meta = subprocess.run(
            [cargo, "metadata", "--format-version", "1", "--no-deps"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if meta.returncode == 0:
            target = Path(json.loads(meta.stdout)["target_directory"])
    return target / "release" / "beanpole-bench"


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


def result_text(run: Run, unit: str = "ops/s") -> str:
    """A load generator run's rate, p99 and errors, for the progress lines."""
    r = run.result
    if r is None:
        return "no result"
    return f"{r['ops_per_s']:,.0f} {unit}, p99 {r['p99_us']:,.0f} µs, errors {r['errors']}"


def progress(run: Run, n: int, total: int, text: str | None = None) -> None:
    """One progress line on stderr; ``text`` replaces the load generator's figures."""
    if text is None and run.scenario == "memory":
        e = run.extra
        text = (
            f"{e.get('bytes_per_job', float('nan')):.0f} B/job, "
            f"{e.get('bytes_per_conn', float('nan')):.0f} B/conn"
        )
    if text is None:
        text = result_text(run)
    bad = "" if run.ok else f"  FAILED: {run.problem}"
    print(
        f"[{n}/{total}] {run.scenario} pair {run.pair + 1} {run.kind}: {text}{bad}",
        file=sys.stderr,
        flush=True,
    )


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
