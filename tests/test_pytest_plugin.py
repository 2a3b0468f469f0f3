"""The pytest plugin: fixtures seen from a test suite of its own (run with pytester)."""

from __future__ import annotations

import importlib.metadata
import os

import pytest

pytest_plugins = ["pytester"]


def entry_point_installed() -> bool:
    """True if the installed distribution registers the plugin (``maturin develop`` does)."""
    found = importlib.metadata.entry_points(group="pytest11", name="beanpole")
    return any(ep.value == "beanpole.pytest_plugin" for ep in found)


def plugin_args() -> list[str]:
    """Load the plugin explicitly, unless pytest will load it from the entry point."""
    if entry_point_installed() and not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    return ["-p", "beanpole.pytest_plugin"]


def test_fixtures_are_listed_with_their_documentation(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass\n")
    result = pytester.runpytest(*plugin_args(), "--fixtures")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*beanpole_server_factory*",
            "*Start servers on demand*",
            "*beanpole_server* -- *",
            "*A fresh, started server on 127.0.0.1 and a free port*",
        ]
    )


@pytest.mark.skipif(not entry_point_installed(), reason="beanpole is not installed")
def test_entry_point_loads_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(beanpole_server_factory): pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


BEANPOLE_SERVER_TESTS = """
import socket

SEEN = []


def talk(address, data):
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(data)
        return conn.recv(1024)


def test_a_server_is_running(beanpole_server):
    SEEN.append(beanpole_server)
    assert beanpole_server.running
    host, port = beanpole_server.address
    assert host == "127.0.0.1"
    assert port not in (0, 11300)
    assert talk((host, port), b"put 0 0 60 2\\r\\nhi\\r\\n") == b"INSERTED 1\\r\\n"
    assert beanpole_server.stats()["total-jobs"] == 1


def test_each_test_gets_a_fresh_one(beanpole_server):
    previous = SEEN[0]
    assert not previous.running  # stopped at the end of the previous test
    assert beanpole_server is not previous
    assert beanpole_server.stats()["total-jobs"] == 0


def test_a_failing_test(beanpole_server):
    SEEN.append(beanpole_server)
    raise AssertionError("deliberate")


def test_server_of_a_failed_test_is_stopped_too():
    assert not SEEN[-1].running
"""


def test_beanpole_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(BEANPOLE_SERVER_TESTS)
    result = pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*test_a_failing_test*deliberate*"])


FACTORY_TESTS = """
SERVERS = []


def test_factory(beanpole_server_factory):
    small = beanpole_server_factory(max_job_size=10)
    other = beanpole_server_factory()
    SERVERS.extend([small, other])
    assert small.port != other.port
    assert small.host == other.host == "127.0.0.1"
    assert small.stats()["max-job-size"] == 10
    assert other.stats()["max-job-size"] == 65535
    assert small.running and other.running


def test_all_stopped():
    assert len(SERVERS) == 2
    assert not any(server.running for server in SERVERS)


def test_factory_and_server_together(beanpole_server, beanpole_server_factory):
    extra = beanpole_server_factory(listen="127.0.0.1")
    assert extra.port != beanpole_server.port
"""


def test_beanpole_server_factory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(FACTORY_TESTS)
    result = pytester.runpytest(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
