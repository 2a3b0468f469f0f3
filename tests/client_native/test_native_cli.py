"""The admin commands (put, peek, kick, kick-job, delete, pause, clear, tail) through
click's CliRunner against both servers, with -H and BEANPOLE_HOST; failures print one
line and exit non-zero."""

from __future__ import annotations

import json
import os
import socket

import pytest
from click.testing import CliRunner, Result

from beanpole.cli import cli
from beanpole.client import Client
from servers import Running

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("BEANPOLE_"):
            monkeypatch.delenv(name)


def run(srv: Running | None, *args: str, stdin: str | None = None) -> Result:
    host = ["-H", f"{srv.host}:{srv.port}"] if srv is not None else []
    cmd, *rest = args
    return CliRunner().invoke(cli, [cmd, *host, *rest], input=stdin, prog_name="beanpole")


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def one_line_failure(result: Result) -> str:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


def test_put_and_peek(any_server: Running) -> None:
    assert ok(run(any_server, "put", "hello")) == "1\n"
    out = ok(run(any_server, "put", "--tube", "t", "--priority", "5", "--json", "x"))
    assert json.loads(out) == {"id": 2}
    assert ok(run(any_server, "put", "--lines", "-", stdin="a\nb\nc\n")) == "3\n4\n5\n"
    assert ok(run(any_server, "peek", "1")) == "1\thello\n"
    peeked = json.loads(ok(run(any_server, "peek", "--tube", "t", "--ready", "--json")))
    assert peeked["id"] == 2 and peeked["body"] == "x" and peeked["stats"]["pri"] == 5
    assert "NOT_FOUND" in one_line_failure(run(any_server, "peek", "99"))
    assert "NOT_FOUND" in one_line_failure(run(any_server, "peek", "--buried"))
    assert run(any_server, "peek").exit_code == 2


def test_host_from_the_environment(any_server: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEANPOLE_HOST", f"{any_server.host}:{any_server.port}")
    assert ok(run(None, "put", "env")) == "1\n"


def test_kick_kick_job_delete_pause(any_server: Running) -> None:
    with Client(any_server.address) as c:
        ids = c.put_many(["a", "b", "c"])
        for _ in ids:
            c.bury(c.reserve(0))
        assert ok(run(any_server, "kick", "2")) == "2\n"
        assert ok(run(any_server, "kick-job", str(ids[2]))) == ""
        assert c.stats()["current-jobs-buried"] == 0
        assert ok(run(any_server, "delete", str(ids[0]), str(ids[1]))) == ""
        assert c.stats()["current-jobs-ready"] == 1
        assert "NOT_FOUND" in one_line_failure(run(any_server, "delete", str(ids[0])))
        assert "NOT_FOUND" in one_line_failure(run(any_server, "kick-job", "999"))
        assert ok(run(any_server, "pause", "default", "30")) == ""
        assert c.stats_tube("default")["pause"] == 30
        assert json.loads(ok(run(any_server, "kick", "--json", "5"))) == {"kicked": 0}


def test_clear(any_server: Running) -> None:
    with Client(any_server.address) as c:
        c.use("q")
        c.put_many([f"r{i}" for i in range(2500)])
        c.put_many(["d1", "d2"], delay=100)
        c.put_many(["b1", "b2", "b3"])
        c.watch("q")
        for job in c.reserve_many(3):
            c.bury(job)
        c.use("default")
        c.put("default stays")
        refused = run(any_server, "clear", "q", stdin="n\n")
        assert refused.exit_code == 1 and "Traceback" not in refused.output
        assert c.stats_tube("q")["current-jobs-ready"] == 2500
        out = json.loads(
            ok(run(any_server, "clear", "q", "--state", "delayed,buried", "--yes", "--json"))
        )
        assert out == {"deleted": 5}
        assert ok(run(any_server, "clear", "q", stdin="y\n")).endswith("deleted 2500 job(s)\n")
        assert c.stats_tube("q")["total-jobs"] == 2505
        for state in ("ready", "delayed", "buried"):
            assert c.stats_tube("q")[f"current-jobs-{state}"] == 0
        assert c.stats_tube("default")["current-jobs-ready"] == 1
        assert run(any_server, "clear", "q", "--state", "bogus").exit_code == 2


def test_tail(any_server: Running) -> None:
    with Client(any_server.address) as c:
        c.use("t")
        c.put_many(["one", "two", "three"], priority=9)
        out = ok(run(any_server, "tail", "t", "--count", "2", "--json"))
        assert [json.loads(line)["body"] for line in out.splitlines()] == ["one", "two"]
        # Released back with their priority, not deleted.
        assert c.stats_tube("t")["current-jobs-ready"] == 3
        assert c.stats_job(1)["pri"] == 9
        out = ok(run(any_server, "tail", "t", "--delete", "--timeout", "1"))
        assert out.splitlines() == ["1\tone", "2\ttwo", "3\tthree"]
        assert c.stats_tube("t")["current-jobs-ready"] == 0


def test_unreachable_server_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        result = CliRunner().invoke(cli, ["put", "-H", f"127.0.0.1:{port}", "x"])
    line = one_line_failure(result)
    assert "cannot connect" in line and str(port) in line
    bad = CliRunner().invoke(cli, ["put", "-H", "nonsense", "x"])
    assert "host:port" in one_line_failure(bad)
