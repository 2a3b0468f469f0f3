"""pystalk's exports and connections: connecting, URIs, socket timeout, stats, drain mode."""

from __future__ import annotations

import os
import signal

import attr
import pystalk  # type: ignore[import-untyped]
import pytest
from pystalk.client import Job  # type: ignore[import-untyped]
from pystalk.pool import NoMoreClients  # type: ignore[import-untyped]

from client_common import drain, wait_until
from pystalk_common import inserted, open_client, raises_beanstalk
from servers import Running


def test_exports_and_classes() -> None:
    assert set(pystalk.__all__) == {
        "BeanstalkClient",
        "BeanstalkConnectionError",
        "BeanstalkError",
        "ProductionPool",
    }
    assert issubclass(pystalk.BeanstalkConnectionError, pystalk.BeanstalkError)
    job = Job(3, b"body")
    assert (job.job_id, job.job_data) == (3, b"body")
    assert job == Job(3, b"body")
    with pytest.raises(attr.exceptions.FrozenInstanceError):
        job.job_id = 4
    with pytest.raises(TypeError):
        Job("3", b"body")  # the id must be an int
    err = pystalk.BeanstalkError(b"NOT_FOUND")
    assert err.message == "NOT_FOUND"
    assert err == pystalk.BeanstalkError("NOT_FOUND")
    assert str(NoMoreClients()) == "No clients can process requests at this time"


def test_lazy_connect_and_ping(any_server: Running) -> None:
    with open_client(any_server) as observer:
        host, port = any_server.address
        lazy = pystalk.BeanstalkClient(host, port)  # no connection yet
        assert (lazy.host, lazy.port, lazy.socket_timeout, lazy.auto_decode) == (
            host,
            port,
            None,
            False,
        )
        assert observer.stats()["total-connections"] == 1
        assert lazy.ping() is True  # a throw-away connection, never sent a command
        # the server accepts it, and notices it hang up, on its own schedule
        wait_until(lambda: observer.stats()["total-connections"] == 2, "ping to connect")
        wait_until(lambda: observer.stats()["current-connections"] == 1, "ping to hang up")
        inserted(lazy.put_job("first command connects"))
        assert observer.stats()["current-connections"] == 2
        lazy.close()
        lazy.close()  # closing twice is harmless


def test_connection_errors(dead_address: tuple[str, int]) -> None:
    host, port = dead_address
    c = pystalk.BeanstalkClient(host, port)
    with pytest.raises(pystalk.BeanstalkConnectionError) as info:
        c.ping()
    assert (info.value.host, info.value.port) == (host, port)
    assert isinstance(info.value.err, ConnectionRefusedError)
    assert f"{host}:{port}" in info.value.message
    with pytest.raises(pystalk.BeanstalkError):  # the subclass is caught by the base class
        c.put_job("nowhere")


def test_connection_closed_by_server(any_server: Running) -> None:
    with open_client(any_server) as c:
        inserted(c.put_job("x"))
        if any_server.pid is not None:
            os.kill(any_server.pid, signal.SIGKILL)
        else:
            any_server.server.stop()  # type: ignore[attr-defined]
        # pystalk wraps an orderly EOF in BeanstalkConnectionError; a reset that surfaces
        # in send() or recv() first escapes unwrapped, as a plain ConnectionError
        with pytest.raises((pystalk.BeanstalkConnectionError, ConnectionError)) as info:
            c.stats()
        if isinstance(info.value, pystalk.BeanstalkConnectionError):
            assert isinstance(info.value.err, ConnectionResetError)
            assert "Connection closed by beanstalkd" in info.value.message


def test_from_uri(any_server: Running) -> None:
    host, port = any_server.address
    for scheme in ("beanstalk", "beanstalkd", "BeanstalkD"):
        c = pystalk.BeanstalkClient.from_uri(f"{scheme}://{host}:{port}", socket_timeout=9)
        assert (c.host, c.port, c.socket_timeout, c.auto_decode) == (host, port, 9, False)
        assert c.ping()
    c = pystalk.BeanstalkClient.from_uri("beanstalk://example.invalid")
    assert (c.host, c.port) == ("example.invalid", 11300)
    c = pystalk.BeanstalkClient.from_uri("beanstalk://[::1]:4567")
    assert (c.host, c.port) == ("::1", 4567)
    c = pystalk.BeanstalkClient.from_uri("beanstalk://[::1]")
    assert (c.host, c.port) == ("::1", 11300)
    with pytest.raises(ValueError):
        pystalk.BeanstalkClient.from_uri(f"http://{host}:{port}")

    c = pystalk.BeanstalkClient.from_uri(f"beanstalk://{host}:{port}", auto_decode=True)
    try:
        jid = inserted(c.put_job("via uri"))
        assert c.reserve_job(0) == Job(jid, "via uri")
    finally:
        c.close()


def test_socket_timeout(any_server: Running) -> None:
    with open_client(any_server, socket_timeout=2) as c:
        with pytest.raises(ValueError):
            c.reserve_job(2)  # must stay below the socket timeout
        with raises_beanstalk("TIMED_OUT"):
            c.reserve_job(1)
        jid = inserted(c.put_job("fine"))
        assert c.reserve_job(1).job_id == jid


# --------------------------------------------------------------------------- stats & draining


def test_stats(any_server: Running) -> None:
    with open_client(any_server) as a, open_client(any_server) as b:
        inserted(a.put_job("x"))
        b.reserve_job(0)
        s = a.stats()
        assert s["version"] == str(s["version"])  # quoted in the YAML, so a str
        assert s["draining"] is False  # a YAML bool
        assert s["pid"] == (any_server.pid if any_server.pid is not None else os.getpid())
        assert (s["current-connections"], s["total-connections"]) == (2, 2)
        assert (s["current-producers"], s["current-workers"]) == (1, 1)
        assert (s["current-jobs-reserved"], s["cmd-reserve-with-timeout"]) == (1, 1)
        assert (s["cmd-stats"], s["current-tubes"], s["total-jobs"]) == (1, 1, 1)
        assert isinstance(s["uptime"], int)
        assert isinstance(s["rusage-utime"], float)
        job_stats = b.stats_job(1)
        assert set(job_stats) >= {
            "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left",
            "file", "reserves", "timeouts", "releases", "buries", "kicks",
        }  # fmt: skip


def test_draining(any_server: Running) -> None:
    with open_client(any_server) as c:
        jid = inserted(c.put_job("before"))
        drain(any_server)
        wait_until(lambda: c.stats()["draining"] is True, "drain mode")
        with raises_beanstalk("DRAINING"):
            c.put_job("after")
        job = c.reserve_job(0)  # workers carry on
        assert job.job_id == jid
        c.delete_job(job)
        assert c.stats()["total-jobs"] == 1
