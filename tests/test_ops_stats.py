"""``beanpole stats`` and ``beanpole top --once`` against beanpole and Debian's beanstalkd:
every format, the tube and job views, and the one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest
import yaml
from click.testing import CliRunner, Result
from prometheus_client.parser import text_string_to_metric_families

import beanpole
from beanpole.cli import cli
from beanpole.client.stats import StatsClient, parse_body
from servers import Running


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("BEANPOLE_"):
            monkeypatch.delenv(name)


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, prog_name="beanpole")


def host_of(server: Running) -> str:
    return f"{server.host}:{server.port}"


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def loaded(any_server: Running) -> Iterator[Running]:
    """A server with jobs in tube mail: 1 buried (id 1), 2 ready of which 1 urgent (id 2),
    1 delayed (id 3)."""
    with greenstalk.Client(any_server.address, use="mail", watch="mail") as c:
        c.put("a")
        c.bury(c.reserve())
        c.put("b", priority=5)
        c.put("c", delay=300)
        c.put("d")
        yield any_server


def test_server_stats_json_keeps_every_field_typed(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    with StatsClient(loaded.address) as client:
        wire = client.stats()
    assert list(data) == list(wire)  # every field, in the server's order
    assert data["current-jobs-ready"] == 2
    assert data["current-jobs-delayed"] == 1
    assert data["current-jobs-buried"] == 1
    assert isinstance(data["uptime"], int)
    assert isinstance(data["rusage-utime"], float)
    assert isinstance(data["draining"], bool)
    assert isinstance(data["id"], str)


def test_server_stats_table_is_readable(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded))
    assert result.exit_code == 0, result.output
    assert "current-jobs-ready" in result.output
    assert "64.0 KiB" in result.output  # max-job-size 65535, made readable
    assert "10.0 MiB" in result.output  # binlog-max-size


def test_tubes_one_row_per_tube(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded), "--tubes", "--format", "json")
    assert result.exit_code == 0, result.output
    tubes = {t["name"]: t for t in json.loads(result.output)}
    assert set(tubes) == {"default", "mail"}
    assert tubes["mail"]["current-jobs-ready"] == 2
    assert tubes["mail"]["current-jobs-urgent"] == 1
    table = invoke("stats", "-H", host_of(loaded), "--tubes")
    assert table.exit_code == 0
    rows = [line.split() for line in table.output.splitlines()]
    mail = next(r for r in rows if r[:1] == ["mail"])
    assert mail[:7] == ["mail", "2", "1", "0", "1", "1", "4"]


def test_tube_option_is_repeatable_and_yaml_parses(loaded: Running) -> None:
    result = invoke(
        "stats", "-H", host_of(loaded), "--tube", "mail", "--tube", "default", "--format", "yaml"
    )
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.output)
    assert [t["name"] for t in data] == ["mail", "default"]
    assert data[0]["current-jobs-buried"] == 1


def test_server_yaml_parses_with_every_value(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded), "--format", "yaml")
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.output)
    with StatsClient(loaded.address) as client:
        wire = client.stats()
    assert set(data) == set(wire)
    assert data["os"] == wire["os"]  # beanstalkd's "#1 SMP ..." survives


def test_job_stats(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded), "--job", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    job = json.loads(result.output)
    assert job["id"] == 2 and job["tube"] == "mail" and job["pri"] == 5
    assert job["state"] == "ready"
    table = invoke("stats", "-H", host_of(loaded), "--job", "3")
    assert table.exit_code == 0
    assert "delayed" in table.output
    assert "5m 00s" in table.output or "4m 59s" in table.output  # delay, made readable


def test_prometheus_format_parses(loaded: Running) -> None:
    result = invoke("stats", "-H", host_of(loaded), "--format", "prometheus")
    assert result.exit_code == 0, result.output
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(result.output)
        for s in family.samples
    }
    assert samples[("beanpole_jobs", (("state", "ready"), ("tube", "mail")))] == 2
    assert samples[("beanpole_jobs", (("state", "buried"), ("tube", "mail")))] == 1
    assert samples[("beanpole_commands_total", (("command", "put"),))] == 4


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--tube", "nope"], "no tube named 'nope'"),
        (["--job", "999"], "no job with id 999"),
        (["--tube", "mail", "--tube", "gone"], "no tube named 'gone'"),
    ],
)
def test_missing_tube_or_job_is_a_one_line_error(
    loaded: Running, args: list[str], fragment: str
) -> None:
    result = invoke("stats", "-H", host_of(loaded), *args)
    assert result.exit_code == 1
    assert fragment in one_line_error(result)


def test_unreachable_server_is_a_one_line_error() -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        result = invoke("stats", "-H", f"127.0.0.1:{port}")
    assert result.exit_code == 1
    assert "cannot connect to 127.0.0.1" in one_line_error(result)


def test_bad_host_is_a_usage_error() -> None:
    result = invoke("stats", "-H", "127.0.0.1:99999")
    assert result.exit_code == 2
    assert "port" in result.output


def test_host_from_the_environment(loaded: Running) -> None:
    result = invoke("stats", "--format", "json", env={"BEANPOLE_HOST": host_of(loaded)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["current-jobs-ready"] == 2


def test_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "bp.sock"
    with beanpole.Server(listen=f"unix:{path}"):
        result = invoke("stats", "-H", f"unix:{path}", "--tubes", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["name"] == "default"


def test_errors_from_a_real_process_have_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beanpole", "stats", "-H", "127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if not k.startswith("BEANPOLE_")},
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "Error: cannot connect to 127.0.0.1:1: Connection refused"
    ]


def test_top_once_prints_one_frame(loaded: Running) -> None:
    result = invoke("top", "--once", "-H", host_of(loaded))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(host_of(loaded))
    assert lines[1].startswith("puts/s -  reserves/s -  deletes/s -")  # one frame: no rates
    assert "jobs: ready 2  urgent 1  reserved 0  delayed 1  buried 1" in lines[2]
    tube_rows = [line.split() for line in lines if line.split()[:1] in (["mail"], ["default"])]
    assert tube_rows[0][:5] == ["mail", "2", "0", "1", "1"]  # sorted by ready first


def test_top_once_unreachable() -> None:
    result = invoke("top", "--once", "-H", "127.0.0.1:1")
    assert "cannot connect" in one_line_error(result)


def test_many_tubes_are_fetched_pipelined(any_server: Running) -> None:
    n = 1200  # more than one window
    with greenstalk.Client(any_server.address) as c:
        for i in range(n):
            c.use(f"t{i}")
            c.put("x")
    with StatsClient(any_server.address) as client:
        _server, tubes = client.snapshot()
        after = client.stats()
    assert len(tubes) == n + 1
    assert sum(int(t["current-jobs-ready"]) for t in tubes) == n
    assert after["cmd-stats-tube"] == n + 1
    # Past 500 rows the table is plain aligned text, one line per tube.
    table = invoke("stats", "-H", f"{any_server.host}:{any_server.port}", "--tubes")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split()[:3] == ["tube", "ready", "urgent"]
    assert len(lines) == 2 + n + 1
    assert lines[-1].split()[:3] == [f"t{n - 1}", "1", "0"]
    # top --once shows one screenful (25 lines off a terminal) and says how many more.
    top = invoke("top", "--once", "-H", f"{any_server.host}:{any_server.port}")
    assert top.exit_code == 0, top.output
    assert len(top.output.splitlines()) <= 25
    assert "more tubes)" in top.output.splitlines()[-1]


def test_parse_body_keeps_hex_ids_and_reads_numbers() -> None:
    body = b"---\nid: 0123456789\npid: 12\nrusage-utime: 0.5\nos: #1 SMP\ndraining: false\n"
    assert parse_body(body, server=True) == {
        "id": "0123456789",
        "pid": 12,
        "rusage-utime": 0.5,
        "os": "#1 SMP",
        "draining": False,
    }


def test_a_server_of_another_protocol_is_a_one_line_error() -> None:
    """Pointed at beanpole's own HTTP endpoint, stats says what came back."""
    with beanpole.Server(port=0, http="0") as srv:
        address = srv.http_address
        assert address is not None
        result = invoke("stats", "-H", f"{address[0]}:{address[1]}")
    line = one_line_error(result)
    assert result.exit_code == 1
    assert line.startswith(f"Error: {address[0]}:{address[1]} ")
    assert "HTTP" in line or "closed the connection" in line


def test_parse_body_keeps_names_as_text_and_reads_signed_numbers() -> None:
    body = b'---\nname: "123"\ncurrent-jobs-ready: 4\n'
    assert parse_body(body) == {"name": "123", "current-jobs-ready": 4}
    assert parse_body(b"---\nid: 7\ntube: 0\nstate: ready\ntime-left: -1\n") == {
        "id": 7,
        "tube": "0",
        "state": "ready",
        "time-left": -1,
    }
