"""Prometheus metrics and health endpoints: ``Server(http=...)`` / ``beanpole serve --http``
and ``beanpole exporter``, scraped over real HTTP and parsed with prometheus_client's
parser; exporter against beanpole and Debian's beanstalkd side by side."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest
from prometheus_client.parser import text_string_to_metric_families

import beanpole
from beanpole.config import Config, ConfigError
from servechild import BeanpoleChild as Child
from servers import Running, start

TIMEOUT = 20.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(address: tuple[str, int], path: str) -> tuple[int, str]:
    host, port = address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=TIMEOUT) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def scrape(address: tuple[str, int]) -> tuple[Samples, set[str]]:
    status, text = get(address, "/metrics")
    assert status == 200, text
    samples: Samples = {}
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, names


def job(samples: Samples, tube: str, state: str, **extra: str) -> float:
    labels = tuple(sorted({"tube": tube, "state": state, **extra}.items()))
    return samples[("beanpole_jobs", labels)]


# -- embedded server ----------------------------------------------------------------------


@pytest.fixture
def served() -> Iterator[beanpole.Server]:
    with beanpole.Server(port=0, http="0") as srv:
        yield srv


def test_metrics_names_and_values(served: beanpole.Server) -> None:
    address = served.http_address
    assert address is not None and address[0] == "127.0.0.1" and address[1] > 0
    with greenstalk.Client((served.host, served.port), use="mail", watch="mail") as c:
        c.put("a")
        c.bury(c.reserve())
        c.put("b", priority=1)
        c.put("c", delay=100)
        c.reserve()  # b
        samples, names = scrape(address)
    assert {
        "beanpole_jobs",
        "beanpole_commands",
        "beanpole_connections",
        "beanpole_job_timeouts",
        "beanpole_uptime_seconds",
        "beanpole_draining",
        "beanpole_hook_events_dropped",
        "beanpole_binlog_records_written",
        "beanpole_binlog_current_index",
        "beanpole_binlog_max_size_bytes",
    } <= names
    assert job(samples, "mail", "buried") == 1
    assert job(samples, "mail", "reserved") == 1
    assert job(samples, "mail", "delayed") == 1
    assert job(samples, "mail", "ready") == 0
    assert job(samples, "default", "ready") == 0
    assert samples[("beanpole_commands_total", (("command", "put"),))] == 3
    assert samples[("beanpole_commands_total", (("command", "reserve"),))] == 2
    assert samples[("beanpole_connections", (("kind", "total"),))] == 1
    assert samples[("beanpole_connections", (("kind", "producers"),))] == 1
    assert samples[("beanpole_job_timeouts_total", ())] == 0
    assert samples[("beanpole_draining", ())] == 0
    assert samples[("beanpole_hook_events_dropped_total", ())] == 0
    assert samples[("beanpole_binlog_max_size_bytes", ())] == 10 * 1024 * 1024
    # beanpole's own version is build info; the wire stats' version is the protocol's.
    assert samples[("beanpole_build_info", (("version", beanpole.__version__),))] == 1


def test_health_and_readiness(served: beanpole.Server) -> None:
    address = served.http_address
    assert address is not None
    assert get(address, "/healthz") == (200, "ok\n")
    assert get(address, "/readyz") == (200, "ready\n")
    assert get(address, "/nope")[0] == 404
    served.drain()
    assert get(address, "/readyz") == (503, "not ready: draining\n")
    assert get(address, "/healthz")[0] == 200
    samples, _ = scrape(address)
    assert samples[("beanpole_draining", ())] == 1


def test_stop_closes_the_endpoint() -> None:
    srv = beanpole.Server(port=0, http="0")
    srv.start()
    address = srv.http_address
    assert address is not None
    assert get(address, "/healthz")[0] == 200
    srv.stop()
    assert srv.http_address is None
    with pytest.raises(OSError), socket.create_connection(address, timeout=TIMEOUT):
        pass


def test_no_http_unless_asked() -> None:
    with beanpole.Server(port=0) as srv:
        assert srv.http_address is None


def test_http_port_in_use_fails_the_start_and_frees_the_queue_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        srv = beanpole.Server(port=0, http=str(port))
        with pytest.raises(OSError, match=f"cannot serve HTTP on {port}"):
            srv.start()
        assert not srv.running
        queue_port = srv.port
    with socket.create_server(("127.0.0.1", queue_port)):  # released by the failed start
        pass


def test_with_a_log_the_binlog_figures_and_health_are_exported(tmp_path: Path) -> None:
    with beanpole.Server(port=0, http="0", binlog_dir=str(tmp_path)) as srv:
        with greenstalk.Client((srv.host, srv.port)) as c:
            c.put("x")
        address = srv.http_address
        assert address is not None
        samples, _ = scrape(address)
        assert samples[("beanpole_binlog_records_written_total", ())] >= 1
        assert samples[("beanpole_binlog_failing", ())] == 0
        assert samples[("beanpole_binlog_errors_total", ())] == 0
        assert get(address, "/readyz")[0] == 200


def test_per_tube_series_are_capped() -> None:
    with (
        beanpole.Server(port=0, http="0", metrics_max_tubes=2) as srv,
        greenstalk.Client((srv.host, srv.port)) as c,
    ):
        for i, jobs in enumerate([1, 4, 2, 3]):
            c.use(f"t{i}")
            for _ in range(jobs):
                c.put("x")
        address = srv.http_address
        assert address is not None
        samples, _ = scrape(address)
    tubes = {dict(labels)["tube"] for (name, labels) in samples if name == "beanpole_jobs"}
    assert tubes == {"t1", "t3", "_other"}
    assert job(samples, "_other", "ready") == 1 + 2  # t0 and t2 (default is empty)
    assert job(samples, "t1", "ready") == 4


def test_hook_events_dropped_is_read_from_the_server() -> None:
    class Counting(beanpole.Server):
        @property
        def hook_events_dropped(self) -> int:
            return 7

    with Counting(port=0, http="0") as srv:
        address = srv.http_address
        assert address is not None
        samples, _ = scrape(address)
    assert samples[("beanpole_hook_events_dropped_total", ())] == 7


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("9100", ("127.0.0.1", 9100)),
        ("0.0.0.0:9100", ("0.0.0.0", 9100)),
        ("[::1]:9100", ("::1", 9100)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_http_address_forms(value: str, expected: tuple[str, int]) -> None:
    from beanpole.addr import parse_http

    assert Config(http=value).http == value
    assert parse_http(value) == expected


@pytest.mark.parametrize("value", ["", "abc", "1.2.3.4", "host.example:80", "70000", "[::1"])
def test_bad_http_address(value: str) -> None:
    with pytest.raises(ConfigError, match="http"):
        Config(http=value)


def test_http_settings_from_the_environment() -> None:
    config = Config.from_env({"BEANPOLE_HTTP": "9100", "BEANPOLE_METRICS_MAX_TUBES": "5"})
    assert (config.http, config.metrics_max_tubes) == ("9100", 5)
    assert Config().http is None and Config().metrics_max_tubes == 1000
    with pytest.raises(ConfigError, match="BEANPOLE_METRICS_MAX_TUBES"):
        Config.from_env({"BEANPOLE_METRICS_MAX_TUBES": "-1"})


def test_http_settings_from_a_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "beanpole.toml"
    path.write_text('[beanpole]\nhttp = "0.0.0.0:9100"\nmetrics_max_tubes = 50\n')
    config = Config.from_toml(path)
    assert (config.http, config.metrics_max_tubes) == ("0.0.0.0:9100", 50)


def test_ipv6_endpoint() -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    with beanpole.Server(port=0, http="[::1]:0") as srv:
        address = srv.http_address
        assert address is not None and address[0] == "::1"
        with urllib.request.urlopen(f"http://[::1]:{address[1]}/healthz", timeout=TIMEOUT) as r:
            assert r.status == 200


# -- processes: beanpole serve --http and beanpole exporter -------------------------------


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.kill()


def test_serve_http_from_the_command_line(children: list[Child]) -> None:
    child = Child("serve", "-p", "0", "--http", "0", "--metrics-max-tubes", "5")
    children.append(child)
    match = child.wait_line(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")
    address = ("127.0.0.1", int(match.group(1)))
    samples, _ = scrape(address)
    assert job(samples, "default", "ready") == 0
    assert get(address, "/readyz")[0] == 200
    child.proc.send_signal(signal.SIGUSR1)
    child.wait_line(r"SIGUSR1: draining")  # printed once drain mode is on
    assert get(address, "/readyz") == (503, "not ready: draining\n")
    assert child.stop() == 0


def test_serve_http_port_in_use_exits_1_with_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", str(port)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith("Error")]
    assert lines == [f"Error: cannot serve HTTP on {port}: Address already in use"], proc.stderr
    assert "Traceback" not in proc.stderr


def test_serve_bad_http_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "serve", "-p", "0", "--http", "nope"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "--http" in proc.stderr and "Traceback" not in proc.stderr


def uptime(server: Running) -> int:
    """The server's own ``uptime``, read over a connection of its own."""
    with greenstalk.Client(server.address) as c:
        return int(c.stats()["uptime"])


def test_exporter_serves_beanpole_and_beanstalkd_with_a_server_label(
    children: list[Child],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{probe.getsockname()[1]}"  # nothing listens there
    with start("beanpole") as bp, start("beanstalkd") as bs:
        targets = {f"{s.host}:{s.port}": s for s in (bp, bs)}
        for s in (bp, bs):
            with greenstalk.Client(s.address, use="work") as c:
                c.put("x")
                c.put("y", delay=100)
        args = ["exporter", "--http", "0"]
        for target in [*targets, dead]:
            args += ["--target", target]
        child = Child(*args)
        children.append(child)
        match = child.wait_line(r"http://127\.0\.0\.1:(\d+)/metrics")
        address = ("127.0.0.1", int(match.group(1)))
        before = {t: uptime(s) for t, s in targets.items()}
        samples, names = scrape(address)
        after = {t: uptime(s) for t, s in targets.items()}
        for target in targets:
            assert job(samples, "work", "ready", server=target) == 1
            assert job(samples, "work", "delayed", server=target) == 1
            labels = (("command", "put"), ("server", target))
            assert samples[("beanpole_commands_total", labels)] == 2
            assert samples[("beanpole_up", (("server", target),))] == 1
            scraped = samples[("beanpole_uptime_seconds", (("server", target),))]
            assert before[target] <= scraped <= after[target]
        assert samples[("beanpole_up", (("server", dead),))] == 0
        assert "beanpole_binlog_records_written" in names
        assert get(address, "/healthz")[0] == 200
        assert child.stop() == 0


def test_exporter_needs_a_target() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "exporter", "--http", "0"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    assert "--target" in proc.stderr


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs: a real file system that runs out of space (needs root)."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_readyz_is_503_while_the_log_refuses_puts(tiny_disk: Path) -> None:
    with (
        beanpole.Server(
            port=0, http="0", binlog_dir=str(tiny_disk / "log"), segment_size=65536
        ) as srv,
        greenstalk.Client((srv.host, srv.port)) as c,
    ):
        address = srv.http_address
        assert address is not None
        assert get(address, "/readyz")[0] == 200
        deadline = time.monotonic() + TIMEOUT
        while True:  # fill the disk; the log fails, recovers and fails again as puts come
            assert time.monotonic() < deadline, "the log never reported failing"
            with contextlib.suppress(greenstalk.OutOfMemoryError):  # refused: no room
                c.put("x" * 1000)
            status, text = get(address, "/readyz")
            if status == 503:
                break
        assert text == "not ready: log failing (puts are refused)\n"
        samples, _ = scrape(address)
        assert samples[("beanpole_binlog_errors_total", ())] >= 1
