"""One run: a fresh server under the load generator, and what the run measured; the
load generator built, and the progress lines the suites print.

Imports only launch and scenarios: every suite (compare, log_bench, tls_bench) builds on
it, so none of them needs another."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch import Server, start_server
from scenarios import IDLE_CONNECTIONS, MEMORY_JOBS, ROOT, Scenario


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


def build_bench(no_build: bool) -> Path:
    """The load generator's binary, built first unless ``no_build``."""
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
