"""Every ``beanpole.Client`` method and every reachable error reply, against beanpole and
Debian's beanstalkd (each test runs once per server kind).

BURIED (after put/release), OUT_OF_MEMORY and INTERNAL_ERROR need a server out of memory,
and EXPECTED_CRLF and UNKNOWN_COMMAND cannot be provoked through the client's methods (it
always frames bodies and only sends known commands); for those the class and its place
in the hierarchy are checked, and the reply parser has its own tests in rust/client."""

from __future__ import annotations

import socket
import threading

import pytest

import beanpole
from beanpole.client import errors as errors
from beanpole.client.blocking import DEFAULT_PRIORITY, Client, Job, parse_yaml
from client_common import drain, wait_until
from native_common import stop_server
from servers import Running, start

pytestmark = pytest.mark.timeout(60)


def test_put_reserve_delete(client: Client[str]) -> None:
    job_id = client.put("hello", priority=7, delay=0, ttr=30)
    job = client.reserve(timeout=0)
    assert job == Job(job_id, "hello")
    stats = client.stats_job(job)
    assert (stats["pri"], stats["ttr"], stats["state"], stats["tube"]) == (
        7,
        30,
        "reserved",
        "default",
    )
    client.delete(job)
    with pytest.raises(errors.NotFoundError):
        client.delete(job_id)
    with pytest.raises(errors.TimedOutError):
        client.reserve(timeout=0)


def test_bytes_bodies_with_no_encoding(bclient: Client[bytes]) -> None:
    body = bytes(range(256)) + b"\r\nRESERVED 1 2\r\n"
    job_id = bclient.put(body)
    assert bclient.peek(job_id) == Job(job_id, body)
    assert bclient.reserve() == Job(job_id, body)
    with pytest.raises(TypeError):
        bclient.put("text")  # type: ignore[arg-type]


def test_unicode_bodies_round_trip(client: Client[str]) -> None:
    for body in ["", "naïve café", "日本語", "emoji 🐍", "nul\x00in", "a\r\nb"]:
        job_id = client.put(body)
        assert client.reserve_job(job_id).body == body
        client.delete(job_id)


def test_release_bury_kick_touch(client: Client[str]) -> None:
    a = client.put("a")
    job = client.reserve(0)
    client.touch(job)
    client.release(job, priority=3, delay=0)
    assert client.stats_job(a)["pri"] == 3
    job = client.reserve(0)
    client.bury(job, priority=9)
    assert client.peek_buried() == Job(a, "a")
    assert client.stats_job(a)["state"] == "buried"
    assert client.kick(10) == 1
    assert client.peek_ready().id == a
    client.bury(client.reserve(0))
    client.kick_job(a)
    assert client.stats_job(a)["state"] == "ready"
    d = client.put("later", delay=100)
    assert client.peek_delayed() == Job(d, "later")
    assert client.kick(5) == 1  # kicks delayed jobs when nothing is buried
    for call in (client.touch, client.kick_job, client.bury, client.release):
        with pytest.raises(errors.NotFoundError):
            call(999_999)


def test_peek_nothing_is_not_found(client: Client[str]) -> None:
    for call in (client.peek_ready, client.peek_delayed, client.peek_buried):
        with pytest.raises(errors.NotFoundError):
            call()
    with pytest.raises(errors.NotFoundError):
        client.peek(12345)


def test_tubes(client: Client[str]) -> None:
    assert client.using() == "default"
    client.use("jobs")
    assert client.using() == "jobs"
    assert client.watch("jobs") == 2
    assert client.watch("other") == 3
    assert sorted(client.watching()) == ["default", "jobs", "other"]
    assert client.ignore("default") == 2
    assert sorted(client.tubes()) == ["default", "jobs", "other"]
    job_id = client.put("x")
    assert client.stats_tube("jobs")["current-jobs-ready"] == 1
    assert client.reserve(0).id == job_id
    client.ignore("other")
    with pytest.raises(errors.NotIgnoredError):
        client.ignore("jobs")
    client.pause_tube("jobs", 60)
    assert client.stats_tube("jobs")["pause"] == 60
    with pytest.raises(errors.NotFoundError):
        client.stats_tube("no-such-tube")
    with pytest.raises(errors.NotFoundError):
        client.pause_tube("no-such-tube", 1)
    with pytest.raises(errors.BadFormatError):
        client.use("-starts-with-dash")
    with pytest.raises(ValueError):
        client.use("two\r\nlines")


def test_constructor_tubes(any_server: Running) -> None:
    with Client(any_server.address, use="p", watch=["a", "b"]) as c:
        assert c.using() == "p"
        assert sorted(c.watching()) == ["a", "b"]
    host, port = any_server.address
    with Client(f"{host}:{port}", watch="only") as c:
        assert c.watching() == ["only"]


def test_stats(client: Client[str]) -> None:
    client.put("x")
    stats = client.stats()
    assert stats["current-jobs-ready"] == 1
    assert stats["cmd-put"] == 1
    assert isinstance(stats["version"], str)
    assert parse_yaml(b'---\nname: "q"\nn: 3\n') == {"name": "q", "n": 3}


def test_deadline_soon(client: Client[str]) -> None:
    client.put("short", ttr=1)
    client.reserve(0)
    with pytest.raises(errors.DeadlineSoonError):
        client.reserve(timeout=5)


def test_job_too_big(small_server: Running) -> None:
    with Client(small_server.address) as c:
        with pytest.raises(errors.JobTooBigError):
            c.put("x" * 101)
        assert c.put("x" * 100) == 1  # the connection is still in step


def test_draining(any_server: Running, client: Client[str]) -> None:
    job_id = client.put("before")  # beanstalkd is up (its SIGUSR1 handler installed)
    drain(any_server)
    wait_until(lambda: client.stats()["draining"] == "true", "drain mode")
    with pytest.raises(errors.DrainingError):
        client.put("x")
    assert client.reserve(0).id == job_id


def test_error_hierarchy() -> None:
    server_errors = [
        errors.BadFormatError,
        errors.BuriedError,
        errors.DeadlineSoonError,
        errors.DrainingError,
        errors.ExpectedCrlfError,
        errors.InternalError,
        errors.JobTooBigError,
        errors.NotFoundError,
        errors.NotIgnoredError,
        errors.OutOfMemoryError,
        errors.TimedOutError,
        errors.UnknownCommandError,
    ]
    for cls in server_errors:
        assert issubclass(cls, errors.BeanstalkdError)
        assert issubclass(cls, beanpole.ClientError)
        word = cls.reply.replace("_", "").lower()
        assert cls.__name__.lower() in (word, word + "error")
    for cls in (
        errors.ConnectFailedError,
        errors.ConnectionLostError,
        errors.ConnectionTimeoutError,
        errors.NotConnectedError,
        errors.UnknownResponseError,
        errors.ServerDownError,
    ):
        assert issubclass(cls, ConnectionError)
        assert issubclass(cls, beanpole.ClientError)
    assert errors.BuriedError("BURIED", 5).id == 5


def test_connect_refused_is_a_connection_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(errors.ConnectFailedError) as info:
            Client(("127.0.0.1", port))
    assert f"127.0.0.1:{port}" in str(info.value)
    assert isinstance(info.value, ConnectionError)


def test_server_gone_mid_session(any_server: Running) -> None:
    c = Client(any_server.address)
    c.put("x")
    stop_server(any_server)
    with pytest.raises(errors.ConnectionLostError):
        c.stats()
    with pytest.raises(errors.NotConnectedError):
        c.stats()
    c.close()


def test_no_reply_within_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)  # the kernel accepts; nobody ever answers
        c = Client(s.getsockname(), timeout=0.2)
        with pytest.raises(errors.ConnectionTimeoutError):
            c.stats()
        with pytest.raises(errors.NotConnectedError):
            c.put("x")


def test_interrupt_wakes_a_blocked_reserve(client: Client[str]) -> None:
    failed: list[BaseException] = []

    def reserve() -> None:
        try:
            client.reserve()
        except BaseException as e:
            failed.append(e)

    t = threading.Thread(target=reserve)
    t.start()
    wait_until(lambda: t.is_alive(), "the reserve to start")
    client.interrupt()
    t.join(10)
    assert not t.is_alive()
    assert len(failed) == 1 and isinstance(failed[0], errors.ClientConnectionError)


def test_close_then_use(client: Client[str]) -> None:
    client.close()
    with pytest.raises(errors.NotConnectedError):
        client.put("x")


def test_unix_socket(tmp_path: object) -> None:
    import pathlib

    path = pathlib.Path(str(tmp_path)) / "sock"
    with beanpole.Server(listen=f"unix:{path}") as srv, Client(f"unix:{path}") as c:
        assert srv.address == str(path)
        assert c.put("u") == 1
        assert c.reserve(0).body == "u"
    with start("beanpole") as running, Client(running.address, timeout=5) as c:
        assert c.put("tcp") == 1


def test_defaults_match_greenstalk() -> None:
    import greenstalk

    assert DEFAULT_PRIORITY == greenstalk.DEFAULT_PRIORITY
    for name in ("NotFoundError", "TimedOutError", "DeadlineSoonError", "BuriedError"):
        assert hasattr(beanpole, name) and hasattr(greenstalk, name)


def test_import_beanpole_stays_light() -> None:
    """The client names resolve lazily, and neither they nor the CLI load the native
    module or pyarrow until a client is made."""
    import subprocess
    import sys

    code = (
        "import sys, beanpole, beanpole.cli\n"
        "assert beanpole.Client.__name__ == 'Client'\n"
        "assert beanpole.ShardedClient and beanpole.AsyncClient and beanpole.BatchError\n"
        "assert issubclass(beanpole.NotFoundError, beanpole.ClientError)\n"
        "print(sorted(m for m in sys.modules if m in ('beanpole._core', 'pyarrow', 'rich')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out
