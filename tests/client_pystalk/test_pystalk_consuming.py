"""pystalk taking jobs: priority order, peeks, delays, kicks, release, bury, time to run."""

from __future__ import annotations

import itertools
import time

import pystalk  # type: ignore[import-untyped]
from pystalk.client import Job  # type: ignore[import-untyped]

from client_common import nudging
from pystalk_common import DEFAULT_PRI, inserted, open_client, raises_beanstalk
from servers import Running

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
