"""The real ``greenstalk`` client (PyPI) driven over its whole public API.

Every test runs against both server kinds through the ``any_server`` fixture (or a local
fixture built on ``servers.start``), so beanpole has to satisfy an unmodified third-party
client exactly as beanstalkd does.  Public API covered (greenstalk 2.1.x):

* ``Client``: ``put``, ``use``, ``reserve`` (blocking and with timeout), ``reserve_job``,
  ``delete``, ``release``, ``bury``, ``touch``, ``watch``, ``ignore``, ``peek``,
  ``peek_ready``, ``peek_delayed``, ``peek_buried``, ``kick``, ``kick_job``, ``stats_job``,
  ``stats_tube``, ``stats``, ``tubes``, ``using``, ``watching``, ``pause_tube``, ``close``,
  ``__enter__``/``__exit__``, ``__repr__``, the ``encoding``, ``use`` and ``watch``
  constructor arguments and all three address forms (``(host, port)``, a Unix socket path,
  an already connected socket).
* ``Job`` (``id``, ``body``, ``__repr__``) and the module constants ``DEFAULT_TUBE``,
  ``DEFAULT_PRIORITY``, ``DEFAULT_DELAY``, ``DEFAULT_TTR``.
* Exceptions raised from real server replies: ``TimedOutError``, ``NotFoundError``,
  ``DeadlineSoonError``, ``NotIgnoredError``, ``JobTooBigError``, ``BadFormatError``,
  ``UnknownCommandError``, ``ExpectedCrlfError``, ``DrainingError`` and
  ``UnknownResponseError`` (all ``greenstalk.Error``; the server ones ``BeanstalkdError``).
  ``BuriedError``, ``OutOfMemoryError`` and ``InternalError`` need the server to run out of
  memory, so only their class hierarchy is checked.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import greenstalk
import pytest

from client_common import COMMON_BINARY_BODIES, COMMON_UNICODE_BODIES, drain, nudging, wait_until
from servers import Running

MAX_U32 = 2**32 - 1

UNICODE_BODIES = [
    *COMMON_UNICODE_BODIES,
    "\r\n",
    "put 0 0 10 5\r\nhello\r\n",  # a protocol command as a body must stay a body
]

BINARY_BODIES = [*COMMON_BINARY_BODIES, random.Random(1234).randbytes(4096)]


# --------------------------------------------------------------------------- helpers


@pytest.fixture
def client(any_server: Running) -> Iterator[greenstalk.Client[str]]:
    with greenstalk.Client(any_server.address) as c:
        yield c


@contextlib.contextmanager
def unix_forwarder(target: tuple[str, int]) -> Iterator[str]:
    """A Unix socket path whose single connection is spliced onto a TCP ``target``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "beanstalk.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        socks: list[socket.socket] = [listener]

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        def serve() -> None:
            with contextlib.suppress(OSError):
                conn, _ = listener.accept()
                upstream = socket.create_connection(target)
                socks.extend([conn, upstream])
                threading.Thread(target=pump, args=(conn, upstream), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, conn), daemon=True).start()

        threading.Thread(target=serve, daemon=True).start()
        try:
            yield path
        finally:
            for s in socks:
                s.close()


# --------------------------------------------------------------------------- basics


def test_module_constants_and_job_class() -> None:
    assert greenstalk.DEFAULT_TUBE == "default"
    assert greenstalk.DEFAULT_PRIORITY == 2**16
    assert greenstalk.DEFAULT_DELAY == 0
    assert greenstalk.DEFAULT_TTR == 60
    job = greenstalk.Job(7, "body")
    assert (job.id, job.body) == (7, "body")
    assert repr(job) == "greenstalk.Job(id=7, body='body')"


def test_exception_hierarchy() -> None:
    server_errors = [
        greenstalk.BadFormatError,
        greenstalk.BuriedError,
        greenstalk.DeadlineSoonError,
        greenstalk.DrainingError,
        greenstalk.ExpectedCrlfError,
        greenstalk.InternalError,
        greenstalk.JobTooBigError,
        greenstalk.NotFoundError,
        greenstalk.NotIgnoredError,
        greenstalk.OutOfMemoryError,
        greenstalk.TimedOutError,
        greenstalk.UnknownCommandError,
    ]
    for cls in server_errors:
        assert issubclass(cls, greenstalk.BeanstalkdError)
    assert issubclass(greenstalk.BeanstalkdError, greenstalk.Error)
    assert issubclass(greenstalk.UnknownResponseError, greenstalk.Error)
    assert not issubclass(greenstalk.UnknownResponseError, greenstalk.BeanstalkdError)
    # BURIED carries the id of the job the server buried (put/release under memory pressure).
    assert greenstalk.BuriedError([b"42"]).id == 42
    assert greenstalk.BuriedError().id is None


def test_put_reserve_delete_roundtrip(client: greenstalk.Client[str]) -> None:
    first = client.put("hello")
    second = client.put("world")
    assert (first, second) == (1, 2)  # a fresh server numbers jobs from 1

    stats = client.stats_job(first)
    assert stats["id"] == first
    assert stats["tube"] == "default"
    assert stats["state"] == "ready"
    assert stats["pri"] == greenstalk.DEFAULT_PRIORITY
    assert stats["delay"] == 0
    assert stats["ttr"] == greenstalk.DEFAULT_TTR
    assert stats["reserves"] == 0

    job = client.reserve()
    assert isinstance(job, greenstalk.Job)
    assert (job.id, job.body) == (first, "hello")
    assert repr(job) == f"greenstalk.Job(id={first}, body='hello')"
    reserved = client.stats_job(job)  # a Job works wherever an id does
    assert reserved["state"] == "reserved"
    assert reserved["reserves"] == 1
    assert 0 < reserved["time-left"] <= greenstalk.DEFAULT_TTR

    client.delete(job)
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_job(first)
    with pytest.raises(greenstalk.NotFoundError):
        client.peek(first)
    with pytest.raises(greenstalk.NotFoundError):
        client.delete(first)

    # delete by plain id, of a job that is ready (never reserved)
    client.delete(second)
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    s = client.stats()
    assert s["cmd-put"] == 2
    assert s["cmd-delete"] == 3  # the failed delete still counts as a delete command
    assert s["total-jobs"] == 2
    assert s["current-jobs-ready"] == 0


@pytest.mark.parametrize("body", UNICODE_BODIES)
def test_unicode_bodies(client: greenstalk.Client[str], body: str) -> None:
    jid = client.put(body)
    assert client.peek(jid).body == body
    job = client.reserve(timeout=0)
    assert (job.id, job.body) == (jid, body)
    client.delete(job)


def test_unicode_bodies_are_sized_in_bytes(
    any_server: Running, client: greenstalk.Client[str]
) -> None:
    """The server sees UTF-8 bytes: a bytes client reads exactly what was encoded."""
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        for body in UNICODE_BODIES:
            jid = client.put(body)
            assert raw.peek(jid).body == body.encode("utf-8")
            client.delete(jid)


@pytest.mark.parametrize("body", BINARY_BODIES, ids=lambda b: f"{len(b)}B")
def test_binary_bodies_with_encoding_none(any_server: Running, body: bytes) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as c:
        assert c.encoding is None
        jid = c.put(body)
        peeked = c.peek(jid)
        assert isinstance(peeked.body, bytes)
        assert peeked.body == body
        job = c.reserve(timeout=0)
        assert (job.id, job.body) == (jid, body)
        c.delete(job)


def test_encoding_none_refuses_str(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as c:
        with pytest.raises(TypeError):
            c.put("a str needs an encoding")  # type: ignore[arg-type]
        assert c.stats()["cmd-put"] == 0  # nothing reached the server


def test_other_encodings(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address, encoding="latin-1") as latin,
        greenstalk.Client(any_server.address, encoding="utf-16-le") as utf16,
        greenstalk.Client(any_server.address, encoding=None) as raw,
    ):
        a = latin.put("café")
        b = utf16.put("café")
        assert raw.peek(a).body == b"caf\xe9"
        assert raw.peek(b).body == "café".encode("utf-16-le")
        assert latin.reserve(timeout=0).body == "café"
        assert utf16.reserve(timeout=0).body == "café"
        # a str client also accepts bytes bodies, passing them through untouched
        c = latin.put(b"\x00\xff")  # type: ignore[arg-type]  # typed str, accepts bytes
        assert raw.peek(c).body == b"\x00\xff"


def test_undecodable_body_keeps_connection_in_sync(
    any_server: Running, client: greenstalk.Client[str]
) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        jid = raw.put(b"\xff\xfe bad utf-8")
    with pytest.raises(UnicodeDecodeError):
        client.peek(jid)
    # the whole body was read before decoding, so the next reply lines up
    assert client.stats_job(jid)["state"] == "ready"
    assert client.using() == "default"


# --------------------------------------------------------------------------- sizes


def test_max_job_size_boundary(small_server: Running) -> None:
    with greenstalk.Client(small_server.address, encoding=None) as c:
        assert c.stats()["max-job-size"] == 100
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(b"y" * 101)
        # the server skipped the oversized body: the connection is still usable and no
        # job (and no job id) was created
        jid = c.put(b"x" * 100)
        assert jid == 1
        assert c.stats()["current-jobs-ready"] == 1
        job = c.reserve(timeout=0)
        assert (job.id, job.body) == (1, b"x" * 100)
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(b"\r\n" * 51)
        assert c.stats()["total-jobs"] == 1


def test_max_job_size_counts_utf8_bytes(small_server: Running) -> None:
    with greenstalk.Client(small_server.address) as c:
        fits = "é" * 50  # 50 characters, 100 bytes
        jid = c.put(fits)
        assert c.peek(jid).body == fits
        with pytest.raises(greenstalk.JobTooBigError):
            c.put(fits + "a")  # 51 characters, 101 bytes
        with pytest.raises(greenstalk.JobTooBigError):
            c.put("🐍" * 26)  # 26 characters, 104 bytes
        assert c.stats()["total-jobs"] == 1


def test_default_max_job_size(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, encoding=None) as raw:
        limit = raw.stats()["max-job-size"]
        assert limit == 65535
        body = random.Random(7).randbytes(limit)
        jid = raw.put(body)
        with pytest.raises(greenstalk.JobTooBigError):
            raw.put(body + b"!")
        job = raw.reserve(timeout=0)
        assert (job.id, job.body) == (jid, body)


# --------------------------------------------------------------------------- ordering


def test_priorities_order_reservation(client: greenstalk.Client[str]) -> None:
    pris = [500, 0, MAX_U32, 1023, 1024, 65536, 0, 7]
    ids = {client.put(f"pri {p} #{i}", priority=p): (p, i) for i, p in enumerate(pris)}
    # urgent = priority < 1024
    assert client.stats()["current-jobs-urgent"] == 5
    assert client.stats_tube("default")["current-jobs-urgent"] == 5
    assert client.peek_ready().body == "pri 0 #1"
    got = []
    for _ in pris:
        job = client.reserve(timeout=0)
        assert client.stats_job(job)["pri"] == ids[job.id][0]
        got.append(job.body)
        client.delete(job)
    # ascending priority; equal priorities in insertion (id) order
    expected = [f"pri {p} #{i}" for i, p in sorted(enumerate(pris), key=lambda t: (t[1], t[0]))]
    assert got == expected


def test_fifo_within_priority(client: greenstalk.Client[str]) -> None:
    ids = [client.put(str(i)) for i in range(50)]
    got = [client.reserve(timeout=0) for _ in ids]
    assert [j.id for j in got] == ids
    assert [j.body for j in got] == [str(i) for i in range(50)]


# --------------------------------------------------------------------------- delays & kicks


def test_delayed_job_kick(client: greenstalk.Client[str]) -> None:
    jid = client.put("later", delay=3600)
    stats = client.stats_job(jid)
    assert stats["state"] == "delayed"
    assert stats["delay"] == 3600
    assert 3590 <= stats["time-left"] <= 3600
    assert client.stats_tube("default")["current-jobs-delayed"] == 1
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    with pytest.raises(greenstalk.NotFoundError):
        client.peek_ready()
    peeked = client.peek_delayed()
    assert (peeked.id, peeked.body) == (jid, "later")

    assert client.kick(10) == 1
    assert client.stats_job(jid)["state"] == "ready"
    assert client.stats_job(jid)["kicks"] == 1
    with pytest.raises(greenstalk.NotFoundError):
        client.peek_delayed()
    assert client.kick(10) == 0
    assert client.reserve(timeout=0).id == jid


def test_peek_delayed_returns_soonest(client: greenstalk.Client[str]) -> None:
    client.put("in an hour", delay=3600)
    soon = client.put("in a minute", delay=60)
    client.put("in ten minutes", delay=600)
    assert client.peek_delayed().id == soon
    assert client.kick(2) == 2  # kick moves the soonest-due delayed jobs first
    with pytest.raises(greenstalk.NotFoundError):
        client.kick_job(soon)  # already ready
    assert client.peek_ready().id == soon
    assert client.peek_delayed().body == "in an hour"


def test_kick_job_delayed_by_job_and_id(client: greenstalk.Client[str]) -> None:
    a = client.put("a", delay=3600)
    b = client.put("b", delay=3600)
    client.kick_job(greenstalk.Job(b, "ignored"))
    assert client.stats_job(b)["state"] == "ready"
    assert client.stats_job(a)["state"] == "delayed"
    client.kick_job(a)
    assert client.stats_job(a)["state"] == "ready"
    with pytest.raises(greenstalk.NotFoundError):
        client.kick_job(a)  # ready jobs cannot be kicked
    with pytest.raises(greenstalk.NotFoundError):
        client.kick_job(999)
    assert [client.reserve(timeout=0).id for _ in range(2)] == [a, b]


def test_delay_elapses(client: greenstalk.Client[str]) -> None:
    start_t = time.monotonic()
    jid = client.put("one second", delay=1)
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    job = client.reserve(timeout=3)  # blocks until the delay is over
    elapsed = time.monotonic() - start_t
    assert (job.id, job.body) == (jid, "one second")
    assert 0.8 <= elapsed < 3


# --------------------------------------------------------------------------- release / bury


def test_release_with_priority_and_delay(client: greenstalk.Client[str]) -> None:
    jid = client.put("work", priority=100)
    other = client.put("other", priority=50)
    job = client.reserve(timeout=0)
    assert job.id == other
    client.release(job, priority=200)
    stats = client.stats_job(other)
    assert (stats["state"], stats["pri"], stats["releases"]) == ("ready", 200, 1)
    assert client.reserve(timeout=0).id == jid  # 100 now beats 200

    job = client.reserve(timeout=0)
    assert job.id == other
    client.release(job, delay=3600)
    stats = client.stats_job(other)
    assert (stats["state"], stats["delay"], stats["releases"]) == ("delayed", 3600, 2)
    assert stats["pri"] == greenstalk.DEFAULT_PRIORITY  # release's default priority
    assert client.peek_delayed().id == other
    with pytest.raises(greenstalk.NotFoundError):
        client.release(job)  # no longer reserved


def test_bury_and_kick(client: greenstalk.Client[str]) -> None:
    buried_ids = []
    for i in range(3):
        client.put(f"doomed {i}")
    for _ in range(3):
        job = client.reserve(timeout=0)
        client.bury(job, priority=5)
        buried_ids.append(job.id)
    delayed = client.put("delayed", delay=3600)

    stats = client.stats_job(buried_ids[0])
    assert (stats["state"], stats["pri"], stats["buries"]) == ("buried", 5, 1)
    assert client.stats()["current-jobs-buried"] == 3
    assert client.stats_tube("default")["current-jobs-buried"] == 3
    assert client.peek_buried().body == "doomed 0"  # the oldest buried job
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)

    # kick moves buried jobs first, and only buried jobs while there are any
    assert client.kick(2) == 2
    assert client.stats_job(buried_ids[0])["state"] == "ready"
    assert client.stats_job(buried_ids[2])["state"] == "buried"
    assert client.kick(10) == 1
    assert client.stats_job(delayed)["state"] == "delayed"
    with pytest.raises(greenstalk.NotFoundError):
        client.peek_buried()
    assert client.kick(10) == 1  # now the delayed one
    assert client.stats_job(delayed)["state"] == "ready"
    assert client.stats()["cmd-kick"] == 3
    assert [client.stats_job(j)["kicks"] for j in buried_ids] == [1, 1, 1]


def test_kick_job_buried(client: greenstalk.Client[str]) -> None:
    client.put("x")
    job = client.reserve(timeout=0)
    client.bury(job)
    assert client.stats_job(job)["pri"] == greenstalk.DEFAULT_PRIORITY
    client.kick_job(job)
    assert client.stats_job(job)["state"] == "ready"
    with pytest.raises(greenstalk.NotFoundError):
        client.bury(job)  # not reserved


def test_reserve_job_by_id(client: greenstalk.Client[str]) -> None:
    a = client.put("a", priority=1)
    b = client.put("b", priority=2)
    delayed = client.put("delayed", delay=3600)
    job = client.reserve_job(b)  # not the front of the queue
    assert (job.id, job.body) == (b, "b")
    assert client.stats_job(b)["state"] == "reserved"
    with pytest.raises(greenstalk.NotFoundError):
        client.reserve_job(b)  # already reserved (by us)
    with pytest.raises(greenstalk.NotFoundError):
        client.reserve_job(12345)
    # beanstalkd 1.12 also reserves delayed and buried jobs by id
    assert client.reserve_job(delayed).body == "delayed"
    client.bury(greenstalk.Job(delayed, "delayed"))
    assert client.reserve_job(delayed).id == delayed
    assert client.stats_job(delayed)["reserves"] == 2
    assert client.reserve(timeout=0).id == a


# --------------------------------------------------------------------------- peeks


def test_peeks_are_scoped_to_the_used_tube(client: greenstalk.Client[str]) -> None:
    client.use("elsewhere")
    ready = client.put("r", priority=9)
    urgent = client.put("u", priority=1)
    delayed = client.put("d", delay=3600)
    to_bury = client.put("to bury")
    assert client.peek_ready().id == urgent
    assert client.peek_delayed().id == delayed

    client.use("default")
    for peek in (client.peek_ready, client.peek_delayed, client.peek_buried):
        with pytest.raises(greenstalk.NotFoundError):
            peek()
    assert client.peek(ready).body == "r"  # peek by id ignores tubes
    assert client.stats_job(ready)["tube"] == "elsewhere"

    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)  # watching default only
    client.watch("elsewhere")
    client.ignore("default")
    job = client.reserve(timeout=0)
    assert job.id == urgent
    client.release(job, priority=1)
    job = client.reserve_job(to_bury)
    client.bury(job)
    client.use("elsewhere")
    assert client.peek_buried().id == to_bury
    assert client.peek_ready().id == urgent
    # peeking changes nothing
    assert client.stats_job(job)["state"] == "buried"
    s = client.stats()
    assert s["cmd-peek"] == 1
    assert s["cmd-peek-ready"] == 3
    assert s["cmd-peek-delayed"] == 2
    assert s["cmd-peek-buried"] == 2


# --------------------------------------------------------------------------- tubes


def test_use_watch_ignore_and_listing(client: greenstalk.Client[str]) -> None:
    assert client.using() == "default"
    assert client.watching() == ["default"]
    assert client.tubes() == ["default"]
    client.use("jobs")
    assert client.using() == "jobs"
    jid = client.put("in jobs")
    assert sorted(client.tubes()) == ["default", "jobs"]
    assert client.stats_job(jid)["tube"] == "jobs"

    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)  # still watching only default
    assert client.watch("jobs") == 2
    assert client.watch("jobs") == 2  # idempotent
    assert sorted(client.watching()) == ["default", "jobs"]
    assert client.ignore("default") == 1
    assert client.ignore("default") == 1  # ignoring an unwatched tube is fine
    assert client.watching() == ["jobs"]
    with pytest.raises(greenstalk.NotIgnoredError):
        client.ignore("jobs")  # the last watched tube
    assert client.watching() == ["jobs"]
    assert client.reserve(timeout=0).id == jid

    tube = client.stats_tube("jobs")
    assert tube["name"] == "jobs"
    assert tube["total-jobs"] == 1
    assert tube["current-jobs-reserved"] == 1
    assert tube["current-using"] == 1
    assert tube["current-watching"] == 1
    with pytest.raises(greenstalk.NotFoundError):
        client.stats_tube("no-such-tube")
    s = client.stats()
    assert s["cmd-use"] == 1
    assert s["cmd-watch"] == 2
    assert s["cmd-ignore"] == 3
    assert s["cmd-list-tube-used"] == 2
    assert s["cmd-list-tubes-watched"] == 4
    assert s["cmd-list-tubes"] == 2


def test_unused_tube_disappears(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as observer:
        with greenstalk.Client(any_server.address, use="temp") as c:
            assert "temp" in observer.tubes()
            assert observer.stats()["current-tubes"] == 2
            c.use("default")
        assert observer.tubes() == ["default"]
        assert observer.stats()["current-tubes"] == 1


def test_tube_names(client: greenstalk.Client[str]) -> None:
    odd = "a-+/;.$_()Z9"
    assert client.watch(odd) == 2
    client.use(odd)
    assert client.using() == odd
    longest = "t" * 200
    client.use(longest)
    assert client.using() == longest
    client.use("1.5")  # looks like a number, is still a name
    assert "1.5" in client.tubes()
    for bad in ("-leading-hyphen", "t" * 201, "has space", "star*"):
        with pytest.raises(greenstalk.BadFormatError):
            client.use(bad)
        with pytest.raises(greenstalk.BadFormatError):
            client.watch(bad)
    assert client.using() == "1.5"
    with pytest.raises(UnicodeEncodeError):
        client.use("tübe")  # greenstalk only sends ASCII tube names


def test_constructor_use_and_watch(any_server: Running) -> None:
    with greenstalk.Client(any_server.address, use="out", watch=["in1", "in2"]) as c:
        assert c.using() == "out"
        assert sorted(c.watching()) == ["in1", "in2"]
    with greenstalk.Client(any_server.address, watch="solo") as c:
        assert c.watching() == ["solo"]
        assert c.using() == "default"
    with greenstalk.Client(any_server.address, watch=("default", "extra")) as c:
        assert sorted(c.watching()) == ["default", "extra"]
    with (
        greenstalk.Client(any_server.address, use="pipe") as producer,
        greenstalk.Client(any_server.address, watch="pipe") as consumer,
    ):
        producer.put("through the pipe")
        assert consumer.reserve(timeout=0).body == "through the pipe"


def test_pause_tube(client: greenstalk.Client[str]) -> None:
    jid = client.put("paused")
    client.pause_tube("default", 3600)
    tube = client.stats_tube("default")
    assert tube["pause"] == 3600
    assert 3590 <= tube["pause-time-left"] <= 3600
    assert tube["cmd-pause-tube"] == 1
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    client.pause_tube("default", 0)  # a zero pause lifts the pause
    assert client.stats_tube("default")["pause"] == 0
    job = client.reserve(timeout=0)
    assert job.id == jid
    client.release(job)

    client.pause_tube("default", 1)
    t0 = time.monotonic()
    with pytest.raises(greenstalk.TimedOutError):
        client.reserve(timeout=0)
    assert client.reserve(timeout=3).id == jid  # handed out once the pause ends
    assert 0.5 <= time.monotonic() - t0 < 3
    with pytest.raises(greenstalk.NotFoundError):
        client.pause_tube("no-such-tube", 1)
    assert client.stats()["cmd-pause-tube"] == 4


# --------------------------------------------------------------------------- time to run


def test_ttr_expiry_and_deadline_soon(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address) as a,
        greenstalk.Client(any_server.address) as b,
    ):
        jid = a.put("short ttr", ttr=1)
        job = a.reserve()
        assert a.stats_job(job)["ttr"] == 1
        with pytest.raises(greenstalk.DeadlineSoonError):
            a.reserve(timeout=5)  # a ttr of 1 s is inside the 1 s safety margin at once
        with pytest.raises(greenstalk.DeadlineSoonError):
            a.reserve()
        with nudging(any_server, a.using):
            again = b.reserve(timeout=5)  # b gets the job once a's ttr has run out
        assert (again.id, again.body) == (jid, "short ttr")
        stats = b.stats_job(jid)
        assert (stats["reserves"], stats["timeouts"], stats["state"]) == (2, 1, "reserved")
        assert b.stats()["job-timeouts"] == 1
        for op in (a.touch, a.delete, a.bury, a.release):
            with pytest.raises(greenstalk.NotFoundError):
                op(job)
        b.touch(again)
        b.delete(again)


def test_touch_extends_ttr(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address) as a,
        greenstalk.Client(any_server.address) as b,
    ):
        a.put("long work", ttr=2)
        job = a.reserve()
        with pytest.raises(greenstalk.TimedOutError):
            b.reserve(timeout=1)  # 1 s of the 2 s ttr goes by
        before = a.stats_job(job)["time-left"]
        a.touch(job)  # the deadline is a whole ttr away again
        after = a.stats_job(job)["time-left"]
        assert after == before + 1
        with nudging(any_server, a.using), pytest.raises(greenstalk.TimedOutError):
            b.reserve(timeout=1)  # up to the original deadline: still a's job
        stats = b.stats_job(job)
        assert (stats["state"], stats["timeouts"], stats["reserves"]) == ("reserved", 0, 1)
        assert b.stats()["cmd-touch"] == 1
        a.delete(job)


def test_reserved_job_is_private(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address) as a,
        greenstalk.Client(any_server.address) as b,
    ):
        jid = a.put("mine")
        job = a.reserve(timeout=0)
        with pytest.raises(greenstalk.TimedOutError):
            b.reserve(timeout=0)
        assert b.peek(jid).body == "mine"
        assert b.stats_job(jid)["state"] == "reserved"
        for op in (b.delete, b.release, b.bury, b.touch, b.kick_job):
            with pytest.raises(greenstalk.NotFoundError):
                op(job)
        a.delete(job)


# --------------------------------------------------------------------------- connections


def test_context_manager_and_close_release_reserved_jobs(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as watcher:
        jid = watcher.put("orphan")
        with greenstalk.Client(any_server.address) as c:
            assert c.reserve(timeout=0).id == jid
            assert watcher.stats_job(jid)["state"] == "reserved"
        # leaving the block closed the connection, so the server released the job
        job = watcher.reserve(timeout=5)
        assert (job.id, job.body) == (jid, "orphan")
        assert watcher.stats_job(jid)["reserves"] == 2
        with pytest.raises(OSError):
            c.put("after close")

        closer = greenstalk.Client(any_server.address)
        closer.close()
        with pytest.raises(OSError):
            closer.stats()


def test_repr_and_address_forms(any_server: Running) -> None:
    host, port = any_server.address
    with greenstalk.Client((host, port)) as c:
        assert repr(c) == f"greenstalk.Client(host={host!r}, port={port!r})"
        jid = c.put("via tcp")

    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        assert repr(c) == f"greenstalk.Client(host={host!r}, port={port!r})"
        assert c.peek(jid).body == "via tcp"

    with unix_forwarder(any_server.address) as path, greenstalk.Client(path) as c:
        assert repr(c) == f"greenstalk.Client(socket={path!r})"
        assert c.peek(jid).body == "via tcp"
        assert c.put("via unix") == jid + 1


def test_stats(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address) as a,
        greenstalk.Client(any_server.address) as b,
    ):
        a.put("x")
        b.reserve(timeout=0)
        s = a.stats()
        ints = [
            "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
            "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-reserve",
            "cmd-reserve-with-timeout", "cmd-stats", "job-timeouts", "total-jobs",
            "max-job-size", "current-tubes", "current-connections", "current-producers",
            "current-workers", "current-waiting", "total-connections", "pid", "uptime",
        ]  # fmt: skip
        for key in ints:
            assert isinstance(s[key], int), key  # type: ignore[literal-required]
        assert isinstance(s["version"], str)
        assert s["draining"] == "false"
        assert s["pid"] == (any_server.pid if any_server.pid is not None else os.getpid())
        assert s["current-connections"] == 2
        assert s["total-connections"] == 2
        assert s["current-producers"] == 1
        assert s["current-workers"] == 1
        assert s["current-jobs-reserved"] == 1
        assert s["cmd-reserve-with-timeout"] == 1
        assert s["cmd-reserve"] == 0
        assert s["cmd-stats"] == 1
        assert s["cmd-stats-job"] == 0
        assert a.stats()["cmd-stats"] == 2


def test_draining_refuses_puts(any_server: Running) -> None:
    with greenstalk.Client(any_server.address) as c:
        jid = c.put("before")
        drain(any_server)
        wait_until(lambda: c.stats()["draining"] == "true", "drain mode")
        with pytest.raises(greenstalk.DrainingError):
            c.put("after")
        job = c.reserve(timeout=0)  # workers carry on
        assert job.id == jid
        c.delete(job)
        assert c.stats()["total-jobs"] == 1


# --------------------------------------------------------------------------- protocol errors


def test_bad_priority_desynchronises_greenstalk(any_server: Running) -> None:
    """beanstalkd answers BAD_FORMAT to the put line, then reads the body as a command."""
    with greenstalk.Client(any_server.address) as c:
        with pytest.raises(greenstalk.BadFormatError):
            c.put("orphan body", priority=2**32)
        with pytest.raises(greenstalk.UnknownCommandError):
            c.using()  # reads the UNKNOWN_COMMAND for the line "orphan body"
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.watching()  # reads the "USING default" meant for using()
        assert (info.value.status, info.value.values) == (b"USING", [b"default"])
    with greenstalk.Client(any_server.address) as fresh:
        assert fresh.stats()["total-jobs"] == 0
        assert fresh.put("next") == 1  # no job id was used up


def test_unknown_command_and_unknown_response(any_server: Running) -> None:
    """Replies greenstalk's own commands never provoke, read from a socket it was handed."""
    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        sock.sendall(b"frobnicate\r\n")
        with pytest.raises(greenstalk.UnknownCommandError):
            c.kick(1)  # reads the UNKNOWN_COMMAND; "KICKED 0" stays queued
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.tubes()  # reads "KICKED 0" where it expects OK
        assert (info.value.status, info.value.values) == (b"KICKED", [b"0"])


def test_expected_crlf_and_unknown_response(any_server: Running) -> None:
    sock = socket.create_connection(any_server.address)
    with greenstalk.Client(sock) as c:
        # a body whose trailing two bytes are not CRLF
        sock.sendall(b"put 0 0 10 3\r\nabcXY")
        with pytest.raises(greenstalk.ExpectedCrlfError):
            c.using()  # its own "USING default" reply is now queued behind
        with pytest.raises(greenstalk.UnknownResponseError) as info:
            c.watch("x")  # reads "USING default" where it expects WATCHING
        assert info.value.status == b"USING"
        assert info.value.values == [b"default"]


# --------------------------------------------------------------------------- concurrency


def exchange_body(i: int) -> str:
    """A distinct, checkable body of varying length and script for job ``i``."""
    return f"job {i:04d} " + "ünï©ødé🐍"[i % 9 :] + "x" * (i % 97)


def test_producer_and_worker_threads_exchange_1000_jobs(any_server: Running) -> None:
    count = 1000

    def produce() -> list[int]:
        with greenstalk.Client(any_server.address, use="exchange") as c:
            return [c.put(exchange_body(i), ttr=30) for i in range(count)]

    def work() -> list[tuple[int, str]]:
        got = []
        with greenstalk.Client(any_server.address, watch="exchange") as c:
            for _ in range(count):
                job = c.reserve(timeout=10)
                got.append((job.id, job.body))
                c.delete(job)
        return got

    with ThreadPoolExecutor(max_workers=2) as pool:
        worker = pool.submit(work)  # starts first, so it blocks waiting for work
        producer = pool.submit(produce)
        ids = producer.result(timeout=30)
        got = worker.result(timeout=30)

    assert len(set(ids)) == count
    # one producer, one priority: the worker sees every job, in order, intact
    assert [jid for jid, _ in got] == ids
    assert [body for _, body in got] == [exchange_body(i) for i in range(count)]
    with greenstalk.Client(any_server.address) as c:
        tube = c.stats_tube("default")
        s = c.stats()
        assert s["cmd-put"] == count
        assert s["cmd-delete"] == count
        assert s["total-jobs"] == count
        assert s["current-jobs-ready"] + s["current-jobs-reserved"] == 0
        assert tube["total-jobs"] == 0


def test_several_workers_share_the_queue(any_server: Running) -> None:
    count, workers = 300, 5
    with greenstalk.Client(any_server.address, encoding=None) as producer:
        bodies = {producer.put(f"{i}".encode() * (1 + i % 5)): i for i in range(count)}

    start_line = threading.Barrier(workers)

    def work() -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        with greenstalk.Client(any_server.address, encoding=None) as c:
            start_line.wait(timeout=10)
            while True:
                try:
                    job = c.reserve(timeout=0)
                except greenstalk.TimedOutError:
                    return got
                got.append((job.id, job.body))
                c.delete(job)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = [f.result(timeout=30) for f in [pool.submit(work) for _ in range(workers)]]

    seen = [jid for got in results for jid, _ in got]
    assert sorted(seen) == sorted(bodies)  # every job exactly once
    for got in results:
        for jid, body in got:
            i = bodies[jid]
            assert body == f"{i}".encode() * (1 + i % 5)
    with greenstalk.Client(any_server.address) as c:
        s = c.stats()
        assert s["cmd-delete"] == count
        assert s["total-connections"] == 1 + workers + 1
        wait_until(lambda: c.stats()["current-connections"] == 1, "workers to hang up")


def test_blocked_reserve_is_woken_by_another_client(any_server: Running) -> None:
    with (
        greenstalk.Client(any_server.address, watch="wake") as worker,
        greenstalk.Client(any_server.address, use="wake") as producer,
        ThreadPoolExecutor(max_workers=1) as pool,
    ):
        blocked = pool.submit(worker.reserve)  # no timeout: blocks until a job arrives
        wait_until(lambda: producer.stats_tube("wake")["current-waiting"] == 1, "worker to block")
        assert producer.stats()["current-waiting"] == 1
        jid = producer.put("wake up")
        job = blocked.result(timeout=5)
        assert (job.id, job.body) == (jid, "wake up")
        assert producer.stats_tube("wake")["current-waiting"] == 0
        assert producer.stats()["cmd-reserve"] == 1
        worker.delete(job)


def test_many_clients_many_tubes(any_server: Running) -> None:
    tubes = [f"tube-{n}" for n in range(6)]
    clients = [greenstalk.Client(any_server.address, use=t, watch=t) for t in tubes]
    try:
        for n, c in enumerate(clients):
            for k in range(n + 1):
                c.put(f"{c.using()} #{k}")
        with greenstalk.Client(any_server.address) as observer:
            assert sorted(observer.tubes()) == sorted([*tubes, "default"])
            assert observer.stats()["current-connections"] == len(tubes) + 1
            for n, t in enumerate(tubes):
                assert observer.stats_tube(t)["current-jobs-ready"] == n + 1
        for n, c in enumerate(clients):
            got = [c.reserve(timeout=0).body for _ in range(n + 1)]
            assert got == [f"{tubes[n]} #{k}" for k in range(n + 1)]
            with pytest.raises(greenstalk.TimedOutError):
                c.reserve(timeout=0)
    finally:
        for c in clients:
            c.close()
