"""greenstalk taking jobs: priority order, delays, kicks, release, bury, peeks, time to run."""

from __future__ import annotations

import time

import greenstalk
import pytest

from client_common import nudging
from servers import Running

MAX_U32 = 2**32 - 1


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
