"""The load generator (``rust/bench``) so that it cannot rot: every scenario with tiny counts
against both servers (exit 0, one JSON line that parses), and proof that its checker fails a
server that answers wrongly; and the write-ahead log suite (``bench/log_bench.py``) end to
end with tiny counts. Nothing here asserts a timing."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from servers import start

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120.0  # seconds for one tiny run; generous, never reached when things work

# Tiny runs of every scenario (`big` needs a 64 KiB max job size on the server).
SCENARIOS: dict[str, list[str]] = {
    "put": ["--jobs", "200", "--connections", "2", "--pipeline", "4"],
    "reserve-delete": ["--jobs", "200", "--connections", "3", "--pipeline", "2"],
    "rt": ["--producers", "2", "--consumers", "2", "--pipeline", "4", "--jobs", "300"],
    "many-tubes": ["--producers", "2", "--consumers", "2", "--tubes", "5", "--jobs", "200"],
    "delayed": ["--producers", "1", "--consumers", "1", "--delay", "1", "--jobs", "10"],
    "storm": ["--connections", "4", "--jobs", "40"],
    "big": ["--connections", "2", "--jobs", "10"],
    "idle": ["--connections", "20", "--hold", "10"],
}
RESULT_KEYS = {
    "scenario",
    "params",
    "ops",
    "seconds",
    "ops_per_s",
    "p50_us",
    "p90_us",
    "p99_us",
    "p999_us",
    "errors",
    "client_cpu_us_per_op",
    "server_cpu_us_per_op",
}


@pytest.fixture(scope="session")
def bench() -> Path:
    """The beanpole-bench binary, built (debug) with cargo."""
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    subprocess.run(
        [cargo, "build", "-q", "-p", "beanpole-bench"], cwd=ROOT, check=True, timeout=900
    )
    meta = subprocess.run(
        [cargo, "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    path = Path(json.loads(meta.stdout)["target_directory"]) / "debug" / "beanpole-bench"
    assert path.exists(), path
    return path


def run_bench(
    bench: Path, scenario: str, port: int, *args: str, host: str = "127.0.0.1"
) -> tuple[int, dict[str, Any], str]:
    """Run one scenario; returns (exit status, the parsed JSON line, stderr)."""
    proc = subprocess.run(
        [str(bench), scenario, "--host", host, "--port", str(port), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, (proc.stdout, proc.stderr)
    return proc.returncode, json.loads(lines[0]), proc.stderr


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_smoke(bench: Path, server_kind: str, scenario: str) -> None:
    with start(server_kind, "-z", "65536", max_job_size=65536) as srv:
        pid = srv.pid if srv.pid is not None else os.getpid()
        extra = ["--server-pid", str(pid)]
        code, result, err = run_bench(bench, scenario, srv.port, *SCENARIOS[scenario], *extra)
    assert code == 0, err
    assert result.keys() >= RESULT_KEYS
    assert result["scenario"] == scenario
    assert result["errors"] == 0
    assert result["ops"] > 0
    # In seconds, not another unit: the run fits in the time the subprocess was given.
    assert 0 <= result["seconds"] <= TIMEOUT
    assert result["p50_us"] <= result["p99_us"] <= result["p999_us"]
    assert result["server_cpu_us_per_op"] is not None


def test_usage_error_exits_2(bench: Path) -> None:
    proc = subprocess.run(
        [str(bench), "no-such-scenario"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "unknown scenario" in proc.stderr


# -- a fake server, to prove the checker fails wrong answers -------------------------------


class FakeServer(socketserver.ThreadingTCPServer):
    """Just enough of the protocol for ``reserve-delete``, with one deliberate fault."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fault: str) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.fault = fault
        self.lock = threading.Lock()
        self.next_id = 1
        self.ready: deque[tuple[int, bytes]] = deque()


class FakeHandler(socketserver.StreamRequestHandler):
    server: FakeServer
    timeout: ClassVar[float] = 30.0

    def handle(self) -> None:
        srv = self.server
        while True:
            line = self.rfile.readline(256)
            if not line:
                return
            words = line.split()
            if not words:
                return
            cmd = words[0]
            if cmd == b"put":
                size = int(words[4])
                body = self.rfile.read(size + 2)[:size]
                with srv.lock:
                    job_id = srv.next_id
                    if srv.fault != "repeated-id":
                        srv.next_id += 1
                    srv.ready.append((job_id, body))
                reply = b"INSERTED %d\r\n" % job_id
            elif cmd.startswith(b"reserve"):
                with srv.lock:
                    job = srv.ready.popleft() if srv.ready else None
                if job is None:
                    reply = b"TIMED_OUT\r\n"
                else:
                    job_id, body = job
                    if srv.fault == "corrupt-body":
                        body = body[:-1] + (b"x" if body[-1:] != b"x" else b"y")
                    if srv.fault == "wrong-id":
                        job_id += 1000
                    reply = b"RESERVED %d %d\r\n%s\r\n" % (job_id, len(body), body)
            elif cmd == b"delete":
                reply = b"NOT_FOUND\r\n" if srv.fault == "not-found" else b"DELETED\r\n"
            else:
                reply = b"UNKNOWN_COMMAND\r\n"
            self.wfile.write(reply)


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[FakeServer]:
    server = FakeServer(str(request.param))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize("fake", ["none"], indirect=True)
def test_fake_server_without_fault_passes(bench: Path, fake: FakeServer) -> None:
    """The fake is good enough that the failures below are the faults', not the fake's."""
    port = fake.server_address[1]
    code, result, err = run_bench(bench, "reserve-delete", port, "--jobs", "20")
    assert code == 0, err
    assert result["errors"] == 0
    assert result["ops"] == 20


@pytest.mark.parametrize(
    "fake", ["repeated-id", "corrupt-body", "wrong-id", "not-found"], indirect=True
)
def test_checker_fails_a_wrong_server(bench: Path, fake: FakeServer) -> None:
    port = fake.server_address[1]
    code, result, err = run_bench(bench, "reserve-delete", port, "--jobs", "20")
    assert code == 1, err
    assert result["errors"] > 0
    assert "error" in err


def test_unreachable_server_exits_2(bench: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        proc = subprocess.run(
            [str(bench), "put", "--port", str(port), "--jobs", "1"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert proc.returncode == 2
    assert "cannot connect" in proc.stderr


# -- the write-ahead log suite (bench/log_bench.py) ------------------------------------------

LOG_SCENARIOS = {
    "f0-c1",
    "f0-c3",
    "f50-c10",
    "nolog-c10",
    "f50-c4p64",
    "nolog-c4p64",
    "restart",
}


def test_log_suite_smoke(bench: Path, tmp_path: Path) -> None:
    """``compare.py --suite log`` end to end with tiny counts against both servers: every
    run succeeds, every job is back after each restart, and the README gets its log
    section between the markers, once, with the rest of the file kept."""
    if shutil.which("beanstalkd") is None:
        pytest.skip("beanstalkd is not installed (apt-get install beanstalkd)")
    readme = tmp_path / "README.md"
    readme.write_text("# main suite\n\nkept as it is\n")
    raw = tmp_path / "raw.jsonl"
    logs = tmp_path / "logs"
    logs.mkdir()
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "compare.py"),
        "--suite",
        "log",
        "--pairs",
        "1",
        "--duration",
        "0.3",
        "--jobs",
        "300",
        "--connections",
        "1",
        "3",
        "--bench",
        str(bench),
        "--no-build",
        "--tmp",
        str(logs),
        "--readme",
        str(readme),
        "--raw",
        str(raw),
    ]
    for _ in range(2):  # the second run replaces the section instead of adding one
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in raw.read_text().splitlines()]
    assert lines[-1]["took"] > 0
    assert len(lines[-1]["fsync_ms"]) == 2
    runs = lines[:-1]
    assert {(r["scenario"], r["kind"]) for r in runs} == {
        (s, k) for s in LOG_SCENARIOS for k in ("beanpole", "beanstalkd")
    } | {("f0nolog-c1", "beanpole"), ("f0nolog-c3", "beanpole")}
    assert all(r["code"] == 0 and not r["problem"] for r in runs), runs
    restarts = [r for r in runs if r["scenario"] == "restart"]
    for r in restarts:
        assert r["extra"]["jobs_after"] == 300
        assert r["extra"]["restart_s"] > 0
        assert r["extra"]["disk_stopped"] > 0
    assert list(logs.iterdir()) == []  # every log directory was removed
    text = readme.read_text()
    assert text.startswith("# main suite\n\nkept as it is\n")
    assert text.count("## Write-ahead log") == 1
    assert text.count("log-suite:begin") == text.count("log-suite:end") == 1
    assert "Problems in the log suite: none" in text


def test_main_report_keeps_the_log_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compare.py rewrites the README from scratch but keeps the log suite's section."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    report = importlib.import_module("main_report")
    log_report = importlib.import_module("log_report")
    readme = tmp_path / "README.md"
    readme.write_text(log_report.splice("# old main report\n", ["## Write-ahead log", "", "x"]))
    report.write_report(readme, None, [], [], "quick", 1, tmp_path / "beanpole-bench", 1.0, 1024)
    text = readme.read_text()
    assert "# old main report" not in text
    assert text.startswith("# beanpole against beanstalkd")
    assert log_report.kept_block(text).count("## Write-ahead log\n\nx\n") == 1
    again = log_report.splice(text, ["## Write-ahead log", "", "y"])
    assert "\nx\n" not in again and "\ny\n" in again


def test_ab_compares_variants_of_beanpole(bench: Path, tmp_path: Path) -> None:
    """``bench/ab.py`` end to end with a tiny load: every variant runs in every round (one
    with a log in a fresh directory, one without), each gets its median (rate and
    server CPU per operation), the log directories are removed, and a variant whose server
    cannot start fails the run."""
    logs = tmp_path / "logs"
    logs.mkdir()

    def ab(*variants: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, str(ROOT / "bench" / "ab.py"), "--rounds", "2"]
        # Enough puts that each server's CPU time spans several of /proc's 10 ms
        # ticks (with 200, a fast run of the first variant read 0, and no ratio).
        cmd += ["--load", "put --jobs 5000 --connections 2", "--bench", str(bench)]
        cmd += ["--tmp", str(logs)]
        for v in variants:
            cmd += ["--variant", v]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)

    proc = ab("log=-b {dir} -f 0", "nolog=")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert sum(line.startswith("round ") for line in out) == 4
    assert any(line.startswith("log: median ") for line in out), out
    assert any(line.startswith("nolog: median ") and "x log" in line for line in out), out
    # The server's CPU time per operation, read from /proc, and its ratio.
    assert any(line.startswith("nolog: median ") and "CPU/op, " in line for line in out), out
    assert list(logs.iterdir()) == []
    bad = ab("ok=", "bad=--no-such-flag")
    assert bad.returncode == 1
    assert "bad: no good run" in bad.stdout
