"""The real ``pystalk`` client (PyPI, EasyPost) driven over its whole public API.

Every test runs against both server kinds (``any_server`` or a local fixture built on
``servers.start``).  Public API covered (pystalk 0.9.x):

* ``BeanstalkClient``: the constructor (lazy connect, ``socket_timeout``, ``auto_decode``),
  ``from_uri``, ``ping``, ``close`` (and the automatic reconnect that restores use/watch),
  ``put_job``, ``put_job_into``, ``use``, ``using`` (the tube context manager and its
  ``BeanstalkInsertingProxy``), ``current_tube``, ``watch``, ``ignore``, ``watchlist``
  (property and setter), ``reserve_job``, ``reserve_iter``, ``delete_job``, ``release_job``,
  ``bury_job``, ``kick_job``, ``kick_jobs``, ``peek_ready``, ``peek_delayed``,
  ``peek_buried`` and their ``*_iter`` forms, ``stats``, ``stats_job``, ``stats_tube``,
  ``list_tubes``, ``pause_tube``, ``unpause_tube``.
* ``pystalk.client.Job``; ``BeanstalkError`` (``message``, equality) for every server error
  pystalk can provoke (NOT_FOUND, TIMED_OUT, DEADLINE_SOON, JOB_TOO_BIG, NOT_IGNORED,
  DRAINING); ``BeanstalkConnectionError`` (``host``, ``port``, ``err``).
* ``ProductionPool`` (``from_uris``, ``use``, ``put_job``, ``put_job_into``, round robin,
  fail-over, ``backoff_time``, ``initial_shuffle``) and ``pystalk.pool.NoMoreClients``.

pystalk 0.9.1 has no ``touch``, no ``peek`` by id, no blocking ``reserve`` without a timeout
and no ``watching`` context manager, so those are not tested here (greenstalk covers them).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import attr
import pystalk  # type: ignore[import-untyped]
import pytest
from pystalk.client import BeanstalkInsertingProxy, Job  # type: ignore[import-untyped]
from pystalk.pool import NoMoreClients  # type: ignore[import-untyped]

from client_common import COMMON_BINARY_BODIES, COMMON_UNICODE_BODIES, drain, nudging, wait_until
from servers import Running, start

DEFAULT_PRI = 65536  # pystalk's default priority
DEFAULT_TTR = 120  # pystalk's default time to run

UNICODE_BODIES = [
    *COMMON_UNICODE_BODIES,
    "INSERTED 99\r\n",  # a reply line as a body must stay a body
]

BINARY_BODIES = [
    *COMMON_BINARY_BODIES,
    random.Random(99).randbytes(5000),  # several of pystalk's 4096-byte reads
    random.Random(98).randbytes(65535),  # the default max job size
]


# --------------------------------------------------------------------------- helpers


def connect(running: Running, **kwargs: object) -> pystalk.BeanstalkClient:
    host, port = running.address
    return pystalk.BeanstalkClient(host, port, **kwargs)


@contextlib.contextmanager
def open_client(running: Running, **kwargs: object) -> Iterator[pystalk.BeanstalkClient]:
    c = connect(running, **kwargs)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def client(any_server: Running) -> Iterator[pystalk.BeanstalkClient]:
    with open_client(any_server) as c:
        yield c


@pytest.fixture
def dead_address() -> Iterator[tuple[str, int]]:
    """An address that refuses connections: bound, never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()


def inserted(reply: tuple[bytes, int]) -> int:
    """pystalk's put_job returns the raw ``(b"INSERTED", id)`` pair, not just the id."""
    status, jid = reply
    assert status == b"INSERTED"
    assert isinstance(jid, int)
    return jid


def raises_beanstalk(message: str) -> contextlib.AbstractContextManager[object]:
    """Expect a ``BeanstalkError`` whose message is exactly the server's reply word."""
    return pytest.raises(pystalk.BeanstalkError, match=f"^{message}$")


# --------------------------------------------------------------------------- basics


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


# --------------------------------------------------------------------------- jobs


def test_put_reserve_delete(client: pystalk.BeanstalkClient) -> None:
    first = inserted(client.put_job("hello"))
    second = inserted(client.put_job(b"world"))
    assert (first, second) == (1, 2)  # a fresh server numbers jobs from 1

    stats = client.stats_job(first)
    assert stats["id"] == first
    assert stats["tube"] == "default"
    assert stats["state"] == "ready"
    assert stats["pri"] == DEFAULT_PRI
    assert stats["ttr"] == DEFAULT_TTR
    assert stats["delay"] == 0

    job = client.reserve_job(0)
    assert isinstance(job, Job)
    assert job == Job(first, b"hello")  # bytes unless auto_decode
    assert client.stats_job(job)["state"] == "reserved"  # a Job works where an id does
    assert client.stats_job(job)["reserves"] == 1
    client.delete_job(job)
    with raises_beanstalk("NOT_FOUND"):
        client.stats_job(first)
    with raises_beanstalk("NOT_FOUND"):
        client.delete_job(first)

    client.delete_job(second)  # a ready job can be deleted by id without reserving it
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    s = client.stats()
    assert (s["cmd-put"], s["cmd-delete"], s["total-jobs"]) == (2, 3, 2)


@pytest.mark.parametrize("body", UNICODE_BODIES)
def test_unicode_bodies(any_server: Running, body: str) -> None:
    with open_client(any_server, auto_decode=True) as text, open_client(any_server) as raw:
        jid = inserted(text.put_job(body))
        assert raw.peek_ready() == Job(jid, body.encode("utf-8"))
        assert text.reserve_job(0) == Job(jid, body)


@pytest.mark.parametrize("body", BINARY_BODIES, ids=lambda b: f"{len(b)}B")
def test_binary_bodies(client: pystalk.BeanstalkClient, body: bytes) -> None:
    jid = inserted(client.put_job(body))
    assert client.peek_ready() == Job(jid, body)
    job = client.reserve_job(0)
    assert job.job_id == jid
    assert job.job_data == body
    client.delete_job(job)


def test_auto_decode_of_invalid_utf8(any_server: Running) -> None:
    with open_client(any_server, auto_decode=True) as c:
        jid = inserted(c.put_job(b"\xff\xfe not utf-8"))
        with pytest.raises(UnicodeDecodeError):
            c.peek_ready()
        # the body was read in full before decoding: the connection is still in step
        assert c.stats_job(jid)["state"] == "ready"


def test_max_job_size_boundary(small_server: Running) -> None:
    with open_client(small_server) as c:
        assert c.stats()["max-job-size"] == 100
        with raises_beanstalk("JOB_TOO_BIG"):
            c.put_job(b"y" * 101)
        jid = inserted(c.put_job(b"x" * 100))  # the connection is still usable
        assert jid == 1  # and the refused job used up no id
        with raises_beanstalk("JOB_TOO_BIG"):
            c.put_job("é" * 50 + "a")  # 51 characters, 101 bytes
        assert c.reserve_job(0) == Job(1, b"x" * 100)
        assert inserted(c.put_job("é" * 50)) == 2  # 100 bytes exactly
        assert c.stats()["total-jobs"] == 2


def test_default_max_job_size(client: pystalk.BeanstalkClient) -> None:
    assert client.stats()["max-job-size"] == 65535
    with raises_beanstalk("JOB_TOO_BIG"):
        client.put_job(b"z" * 65536)
    assert client.stats()["total-jobs"] == 0


# --------------------------------------------------------------------------- ordering


def test_priorities_and_reserve_iter(client: pystalk.BeanstalkClient) -> None:
    assert list(client.reserve_iter()) == []  # nothing ready: ends at once
    pris = [300, 0, 2**32 - 1, 1023, 1024, DEFAULT_PRI, 0, 5]
    for i, p in enumerate(pris):
        inserted(client.put_job(f"{p}/{i}", pri=p))
    assert client.stats()["current-jobs-urgent"] == 5  # priority < 1024
    jobs = list(client.reserve_iter())
    expected = [f"{p}/{i}" for i, p in sorted(enumerate(pris), key=lambda t: (t[1], t[0]))]
    assert [j.job_data.decode() for j in jobs] == expected
    assert client.stats()["current-jobs-reserved"] == len(pris)
    assert [client.stats_job(j)["pri"] for j in jobs] == sorted(pris)


def test_peek_iterators(client: pystalk.BeanstalkClient) -> None:
    for i in range(3):
        inserted(client.put_job(f"ready {i}"))
    # peek_ready_iter yields whatever is first, so without consuming it repeats itself
    same = list(itertools.islice(client.peek_ready_iter(), 3))
    assert same == [Job(1, b"ready 0")] * 3
    seen = []
    for job in client.peek_ready_iter():
        seen.append(job.job_data)
        client.delete_job(job)
    assert seen == [b"ready 0", b"ready 1", b"ready 2"]

    for i in range(3):
        inserted(client.put_job(f"delayed {i}", delay=3600 - i))
    seen = []
    for job in client.peek_delayed_iter():
        seen.append(job.job_data)
        client.kick_job(job)
    assert seen == [b"delayed 2", b"delayed 1", b"delayed 0"]  # soonest first

    for job in client.reserve_iter():
        client.bury_job(job)
    seen = []
    for job in client.peek_buried_iter():
        seen.append(job.job_data)
        client.delete_job(job)
    # kicked jobs rejoin the ready queue in id order; buried ones come out oldest first
    assert seen == [b"delayed 0", b"delayed 1", b"delayed 2"]
    assert client.stats()["current-jobs-buried"] == 0
    for peek in (client.peek_ready, client.peek_delayed, client.peek_buried):
        with raises_beanstalk("NOT_FOUND"):
            peek()


# --------------------------------------------------------------------------- delays & kicks


def test_delay_kick_and_kick_job(client: pystalk.BeanstalkClient) -> None:
    a = inserted(client.put_job("a", delay=3600))
    b = inserted(client.put_job("b", delay=60))
    stats = client.stats_job(a)
    assert (stats["state"], stats["delay"]) == ("delayed", 3600)
    assert client.stats_tube("default")["current-jobs-delayed"] == 2
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.peek_delayed() == Job(b, b"b")
    assert client.kick_jobs(1) == (b"KICKED", 1)  # the raw reply pair again
    assert client.stats_job(b)["state"] == "ready"
    client.kick_job(Job(a, b"a"))
    assert client.stats_job(a)["kicks"] == 1
    with raises_beanstalk("NOT_FOUND"):
        client.kick_job(a)  # ready jobs cannot be kicked
    assert client.kick_jobs(10) == (b"KICKED", 0)
    assert [j.job_id for j in client.reserve_iter()] == [a, b]


def test_delay_elapses(client: pystalk.BeanstalkClient) -> None:
    t0 = time.monotonic()
    jid = inserted(client.put_job("one second", delay=1))
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.reserve_job(3) == Job(jid, b"one second")  # blocks until it is due
    assert 0.8 <= time.monotonic() - t0 < 3


# --------------------------------------------------------------------------- release / bury


def test_release_job(client: pystalk.BeanstalkClient) -> None:
    jid = inserted(client.put_job("work", pri=100))
    other = inserted(client.put_job("other", pri=50))
    job = client.reserve_job(0)
    assert job.job_id == other
    assert client.release_job(job, pri=200) == b"RELEASED"
    stats = client.stats_job(other)
    assert (stats["state"], stats["pri"], stats["releases"]) == ("ready", 200, 1)
    assert client.reserve_job(0).job_id == jid

    job = client.reserve_job(0)
    assert client.release_job(job.job_id, delay=3600) == b"RELEASED"
    stats = client.stats_job(other)
    assert (stats["state"], stats["delay"], stats["pri"]) == ("delayed", 3600, DEFAULT_PRI)
    with raises_beanstalk("NOT_FOUND"):
        client.release_job(job)  # not reserved any more


def test_bury_and_kick(client: pystalk.BeanstalkClient) -> None:
    for i in range(3):
        inserted(client.put_job(f"doomed {i}"))
    buried = []
    for job in client.reserve_iter():
        assert client.bury_job(job, pri=7) == b"BURIED"
        buried.append(job.job_id)
    delayed = inserted(client.put_job("delayed", delay=3600))
    stats = client.stats_job(buried[0])
    assert (stats["state"], stats["pri"], stats["buries"]) == ("buried", 7, 1)
    assert client.stats_tube("default")["current-jobs-buried"] == 3
    assert client.peek_buried() == Job(buried[0], b"doomed 0")

    assert client.kick_jobs(2) == (b"KICKED", 2)  # buried jobs first
    assert client.kick_jobs(5) == (b"KICKED", 1)  # and only buried ones while any remain
    assert client.stats_job(delayed)["state"] == "delayed"
    assert client.kick_jobs(5) == (b"KICKED", 1)
    assert client.stats_job(delayed)["state"] == "ready"

    job = client.reserve_job(0)
    client.bury_job(job.job_id)
    assert client.stats_job(job)["pri"] == DEFAULT_PRI
    client.kick_job(job.job_id)
    assert client.stats_job(job)["state"] == "ready"
    with raises_beanstalk("NOT_FOUND"):
        client.bury_job(job)  # not reserved


# --------------------------------------------------------------------------- tubes


def test_use_using_and_put_job_into(client: pystalk.BeanstalkClient) -> None:
    assert client.current_tube == "default"
    client.use("main")
    assert client.current_tube == "main"
    main_id = inserted(client.put_job("into main"))

    with client.using("side") as inserter:
        assert isinstance(inserter, BeanstalkInsertingProxy)
        assert (inserter.tube, inserter.beanstalk_client) == ("side", client)
        assert client.current_tube == "side"
        side_id = inserted(inserter.put_job("into side", pri=3, delay=3600, ttr=30))
    assert client.current_tube == "main"  # restored

    with pytest.raises(RuntimeError), client.using("oops"):
        raise RuntimeError("the previous tube is restored even on error")
    assert client.current_tube == "main"

    other_id = inserted(client.put_job_into("other", b"into other", pri=9, ttr=15))
    assert client.current_tube == "main"
    assert client.stats_job(main_id)["tube"] == "main"
    side = client.stats_job(side_id)
    assert (side["tube"], side["pri"], side["state"], side["ttr"]) == ("side", 3, "delayed", 30)
    other = client.stats_job(other_id)
    assert (other["tube"], other["pri"], other["ttr"]) == ("other", 9, 15)
    assert sorted(client.list_tubes()) == ["default", "main", "other", "side"]

    tube = client.stats_tube("side")
    assert tube["name"] == "side"
    assert (tube["total-jobs"], tube["current-jobs-delayed"], tube["current-using"]) == (1, 1, 0)
    assert client.stats_tube("main")["current-using"] == 1
    with raises_beanstalk("NOT_FOUND"):
        client.stats_tube("no-such-tube")


def test_watch_ignore_and_watchlist(client: pystalk.BeanstalkClient) -> None:
    assert client.watchlist == {"default"}
    inserted(client.put_job_into("a", "from a"))
    inserted(client.put_job_into("b", "from b"))
    client.watch("a")  # the first explicit watch drops "default"
    assert client.watchlist == {"a"}
    assert client.stats_tube("a")["current-watching"] == 1
    assert client.stats_tube("default")["current-watching"] == 0
    assert client.reserve_job(0).job_data == b"from a"

    client.watch("default")
    assert client.watchlist == {"a", "default"}
    client.ignore("a")
    assert client.watchlist == {"default"}
    with pytest.raises(KeyError):
        client.ignore("never-watched")  # pystalk checks its own list first
    with raises_beanstalk("NOT_IGNORED"):
        client.ignore("default")  # the server refuses to drop the last tube
    assert client.watchlist == {"default"}

    client.watchlist = ["b", "c"]
    assert client.watchlist == {"b", "c"}
    assert client.stats_tube("default")["current-watching"] == 0
    assert client.stats_tube("b")["current-watching"] == 1
    assert client.stats_tube("c")["current-watching"] == 1
    assert client.reserve_job(0).job_data == b"from b"
    s = client.stats()
    assert (s["cmd-watch"], s["cmd-ignore"]) == (4, 4)


def test_close_reconnects_and_restores_tubes(any_server: Running) -> None:
    with open_client(any_server) as observer, open_client(any_server) as c:
        c.use("out")
        c.watch("in")
        inserted(observer.put_job_into("in", "queued"))
        held = c.reserve_job(0)
        c.close()
        # the server let go of the reserved job when the connection closed
        wait_until(lambda: observer.stats_job(held)["state"] == "ready", "release on close")
        assert observer.stats_job(held)["reserves"] == 1

        jid = inserted(c.put_job("after reconnect"))  # reconnects, then `use out` again
        assert observer.stats_job(jid)["tube"] == "out"
        assert c.reserve_job(0) == Job(held.job_id, b"queued")  # watching "in" again
        assert c.watchlist == {"in"}
        assert observer.stats_tube("in")["current-watching"] == 1
        assert observer.stats()["total-connections"] == 3


def test_pause_and_unpause_tube(client: pystalk.BeanstalkClient) -> None:
    jid = inserted(client.put_job("paused"))
    assert client.pause_tube("default") == b"PAUSED"  # an hour by default
    tube = client.stats_tube("default")
    assert tube["pause"] == 3600
    assert 3590 <= tube["pause-time-left"] <= 3600
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.unpause_tube("default") == b"PAUSED"
    assert client.stats_tube("default")["pause"] == 0
    job = client.reserve_job(0)
    client.release_job(job)

    assert client.pause_tube("default", delay=1) == b"PAUSED"
    t0 = time.monotonic()
    with raises_beanstalk("TIMED_OUT"):
        client.reserve_job(0)
    assert client.reserve_job(3).job_id == jid  # handed out when the pause ends
    assert 0.5 <= time.monotonic() - t0 < 3
    with raises_beanstalk("NOT_FOUND"):
        client.pause_tube("no-such-tube", 1)
    assert client.stats_tube("default")["cmd-pause-tube"] == 3


def test_tube_names_come_back_as_yaml_scalars(any_server: Running) -> None:
    """pystalk YAML-parses list-tubes, which beanstalkd (1.12 and 1.13) writes unquoted."""
    names = ["1.5", "123", "yes", "plain"]
    clients = [connect(any_server) for _ in names]
    try:
        for c, name in zip(clients, names, strict=True):
            c.use(name)
        tubes = clients[0].list_tubes()
        assert sorted(map(str, tubes)) == sorted(["default", "1.5", "123", "True", "plain"])
        assert 1.5 in tubes
        assert 123 in tubes
        assert True in tubes
        # stats-tube quotes the name since beanstalkd 1.13 ("1.5"); 1.12 leaves it bare (1.5)
        assert str(clients[0].stats_tube("1.5")["name"]) == "1.5"
    finally:
        for c in clients:
            c.close()


# --------------------------------------------------------------------------- time to run


def test_ttr_expiry_and_deadline_soon(any_server: Running) -> None:
    with open_client(any_server) as a, open_client(any_server) as b:
        jid = inserted(a.put_job("short ttr", ttr=1))
        job = a.reserve_job(2)
        assert a.stats_job(job)["ttr"] == 1
        with raises_beanstalk("DEADLINE_SOON"):
            a.reserve_job(5)  # a ttr of 1 s is inside the 1 s safety margin at once
        with nudging(any_server, a.list_tubes):
            again = b.reserve_job(5)  # b gets the job once a's ttr has run out
        assert again == Job(jid, b"short ttr")
        stats = b.stats_job(jid)
        assert (stats["reserves"], stats["timeouts"], stats["state"]) == (2, 1, "reserved")
        assert b.stats()["job-timeouts"] == 1
        with raises_beanstalk("NOT_FOUND"):
            a.delete_job(job)
        with raises_beanstalk("NOT_FOUND"):
            a.release_job(job)
        b.delete_job(again)


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


# --------------------------------------------------------------------------- production pool


def test_pool_round_robin(server_kind: str) -> None:
    with start(server_kind) as one, start(server_kind) as two:
        uris = [f"beanstalk://{h}:{p}" for h, p in (one.address, two.address)]
        pool = pystalk.ProductionPool.from_uris(uris, socket_timeout=5, initial_shuffle=False)
        replies = [pool.put_job(f"job {i}") for i in range(6)]
        assert [inserted(r) for r in replies] == [1, 1, 2, 2, 3, 3]  # alternating servers
        pool.use("pooled")
        assert [inserted(pool.put_job("in tube")) for _ in range(2)] == [4, 4]
        assert [inserted(pool.put_job_into("explicit", "x", pri=5)) for _ in range(2)] == [5, 5]
        with open_client(one) as c1, open_client(two) as c2:
            for c in (c1, c2):
                assert c.stats()["total-jobs"] == 5
                assert c.stats_job(1)["tube"] == "default"
                assert c.stats_job(4)["tube"] == "pooled"
                assert (c.stats_job(5)["tube"], c.stats_job(5)["pri"]) == ("explicit", 5)
            assert [j.job_data for j in c1.reserve_iter()] == [b"job 0", b"job 2", b"job 4"]
            assert [j.job_data for j in c2.reserve_iter()] == [b"job 1", b"job 3", b"job 5"]


def test_pool_sticky_and_failover(server_kind: str, dead_address: tuple[str, int]) -> None:
    with start(server_kind) as live:
        dead = pystalk.BeanstalkClient(*dead_address)
        pool = pystalk.ProductionPool(
            [dead, connect(live)], round_robin=False, backoff_time=60, initial_shuffle=False
        )
        # the dead server is skipped (and backed off), every job lands on the live one
        assert [inserted(pool.put_job(f"{i}")) for i in range(4)] == [1, 2, 3, 4]
        with open_client(live) as c:
            assert c.stats()["total-jobs"] == 4

        shuffled = pystalk.ProductionPool([connect(live)])
        assert inserted(shuffled.put_job("shuffled pool of one")) == 5

    with pytest.raises(ValueError):
        pystalk.ProductionPool([])
    all_dead = pystalk.ProductionPool([pystalk.BeanstalkClient(*dead_address)] * 2)
    with pytest.raises(NoMoreClients):
        all_dead.put_job("nowhere")


def test_pool_does_not_retry_job_too_big(server_kind: str) -> None:
    with (
        start(server_kind, "-z", "100", max_job_size=100) as small,
        start(server_kind) as big,
    ):
        pool = pystalk.ProductionPool([connect(small), connect(big)], initial_shuffle=False)
        with raises_beanstalk("JOB_TOO_BIG"):
            pool.put_job(b"x" * 101)  # not a retriable error: no fail-over
        with open_client(big) as c:
            assert c.stats()["total-jobs"] == 0


# --------------------------------------------------------------------------- concurrency


def exchange_body(i: int) -> bytes:
    """A distinct, checkable body of varying length for job ``i``."""
    return f"job {i:04d} ".encode() + bytes([i % 256]) * (i % 131) + "ü🐍".encode()


def test_producer_and_worker_threads_exchange_1000_jobs(any_server: Running) -> None:
    count = 1000

    def produce() -> list[int]:
        with open_client(any_server) as c, c.using("exchange") as inserter:
            return [inserted(inserter.put_job(exchange_body(i))) for i in range(count)]

    def work() -> list[Job]:
        got = []
        with open_client(any_server) as c:
            c.watch("exchange")
            for _ in range(count):
                job = c.reserve_job(10)
                got.append(job)
                c.delete_job(job)
        return got

    with ThreadPoolExecutor(max_workers=2) as pool:
        worker = pool.submit(work)
        producer = pool.submit(produce)
        ids = producer.result(timeout=30)
        got = worker.result(timeout=30)

    assert len(set(ids)) == count
    assert [j.job_id for j in got] == ids  # one producer, one priority: FIFO
    assert [j.job_data for j in got] == [exchange_body(i) for i in range(count)]
    with open_client(any_server) as c:
        s = c.stats()
        assert (s["cmd-put"], s["cmd-delete"], s["total-jobs"]) == (count, count, count)
        assert s["current-jobs-ready"] + s["current-jobs-reserved"] == 0


def test_several_workers_share_the_queue(any_server: Running) -> None:
    count, workers = 300, 5
    with open_client(any_server) as producer:
        bodies = {inserted(producer.put_job(f"{i}" * (1 + i % 4))): i for i in range(count)}
    start_line = threading.Barrier(workers)

    def work() -> list[Job]:
        with open_client(any_server, auto_decode=True) as c:
            c.stats()  # connect before the race starts
            start_line.wait(timeout=10)
            got = []
            for job in c.reserve_iter():
                got.append(job)
                c.delete_job(job)
            return got

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = [f.result(timeout=30) for f in [pool.submit(work) for _ in range(workers)]]

    jobs = [j for got in results for j in got]
    assert sorted(j.job_id for j in jobs) == sorted(bodies)  # every job exactly once
    for j in jobs:
        i = bodies[j.job_id]
        assert j.job_data == f"{i}" * (1 + i % 4)
    with open_client(any_server) as c:
        assert c.stats()["cmd-delete"] == count
        assert c.stats()["total-connections"] == 1 + workers + 1


def test_blocked_reserve_is_woken_by_another_client(any_server: Running) -> None:
    with (
        open_client(any_server) as worker,
        open_client(any_server) as producer,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        worker.watch("wake")
        blocked = pool.submit(worker.reserve_job, 10)
        wait_until(lambda: producer.stats_tube("wake")["current-waiting"] == 1, "worker waits")
        assert producer.stats()["current-waiting"] == 1
        jid = inserted(producer.put_job_into("wake", "wake up"))
        assert blocked.result(timeout=5) == Job(jid, b"wake up")
        assert producer.stats_tube("wake")["current-waiting"] == 0
