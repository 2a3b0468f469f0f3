"""Filling a server with jobs in every state, and recording what it holds before a stop."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from logserver import Client

MAX_JOB_SIZE = 65535  # the default -z
WEIRD_TUBE = "img/thumbs;v2.$(x)_+-"


@dataclass
class Filled:
    """What was done to the first server, and what it showed just before it stopped."""

    live: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    reserved_at_stop: set[int] = field(default_factory=set)
    buried_order: dict[str, list[int]] = field(default_factory=dict)
    highest_id: int = 0
    tubes: set[str] = field(default_factory=set)
    stats: dict[int, dict[str, str]] = field(default_factory=dict)
    bodies: dict[int, bytes] = field(default_factory=dict)
    taken_at: float = 0.0
    holders: list[Client] = field(default_factory=list)


def worker(address: tuple[str, int], tube: str) -> Client:
    """A connection watching only ``tube``."""
    c = Client(address)
    c.watch(tube)
    if tube != "default":
        c.ignore("default")
    return c


def fill(address: tuple[str, int], max_job_size: int = MAX_JOB_SIZE) -> Filled:
    """Jobs in every state, through several connections. Reserved jobs stay reserved by
    connections kept open in ``Filled.holders``."""
    f = Filled()
    rng = random.Random(20260101)
    p = Client(address)
    f.holders.append(p)

    def put(tube: str, body: bytes, pri: int = 0, delay: int = 0, ttr: int = 60) -> int:
        p.use(tube)
        job_id = p.put(body, pri=pri, delay=delay, ttr=ttr)
        assert job_id > f.highest_id
        f.highest_id = job_id
        f.live.add(job_id)
        f.tubes.add(tube)
        return job_id

    # Ready jobs in several tubes, with priorities across the whole range.
    for pri in (0, 1023, 1024, 2**31, 2**32 - 1, 0):
        put("default", f"default at {pri}".encode(), pri=pri)
    for pri in (5, 7, 5):
        put("emails", f"mail {pri}".encode(), pri=pri, ttr=300)
    put(WEIRD_TUBE, b"odd tube name", pri=100, ttr=1)

    # Binary bodies: NUL, CRLF, something that looks like a command, every byte value.
    for body in (
        b"",
        b"\x00",
        b"\r\n",
        b"a\r\nb\x00c\r\n",
        b"\r\n\r\nput 0 0 1 1\r\nx\r\n",
        bytes(range(256)),
        bytes(range(255, -1, -1)) * 3,
    ):
        put("binary", body, pri=rng.randrange(2**32))

    # Delayed jobs, with time left.
    put("later", b"in an hour", pri=9, delay=3600)
    put("later", b"in two minutes", pri=3, delay=120, ttr=5)

    # A job of exactly the maximum size, then two small ones (beanstalkd's replay skips
    # the rest of a file after a job of the maximum size).
    big = bytes(rng.randrange(256) for _ in range(max_job_size - 4)) + b"\r\n\r\n"
    assert len(big) == max_job_size
    put("big", big, pri=1)
    put("big", b"after the big one", pri=2)
    put("big", b"and another", pri=2, delay=600)

    # Buried jobs in a known order, with priorities changed by bury.
    graves = [put("graveyard", f"grave {i}".encode(), pri=10) for i in range(4)]
    w = worker(address, "graveyard")
    f.holders.append(w)
    assert [w.reserve()[0] for _ in graves] == graves
    w.bury(graves[2], 7)
    w.bury(graves[0], 3)
    w.bury(graves[3], 4000)
    w.bury(graves[1], 3)
    # Kicked from buried, reserved and buried again: it goes to the end of the order.
    w.kick_job(graves[0])
    assert w.reserve() == (graves[0], b"grave 0")
    w.bury(graves[0], 2**32 - 1)
    f.buried_order["graveyard"] = [graves[2], graves[3], graves[1], graves[0]]

    # Released with delay 0 and a new priority (beanstalkd forgets the priority), and
    # released with a delay.
    w = worker(address, "released")
    f.holders.append(w)
    first = put("released", b"release me now", pri=500)
    second = put("released", b"release me later", pri=501)
    assert w.reserve()[0] == first
    w.release(first, 7, 0)
    assert w.reserve()[0] == first  # now pri 7, ahead of the second job
    w.release(first, 600, 0)  # now behind the second one
    assert w.reserve()[0] == second
    w.release(second, 11, 900)

    # Kicked from buried, from delayed (kick-job), and in bulk (kick) from delayed.
    w = worker(address, "kicks")
    f.holders.append(w)
    from_buried = put("kicks", b"kicked from buried", pri=20)
    assert w.reserve()[0] == from_buried
    w.bury(from_buried, 21)
    w.kick_job(from_buried)
    from_delayed = put("kicks", b"kicked from delayed", pri=22, delay=3600)
    w.kick_job(from_delayed)
    put("bulk", b"bulk 1", pri=1, delay=1000)
    put("bulk", b"bulk 2", pri=1, delay=2000)
    p.use("bulk")
    assert p.kick(10) == 2

    # A TTR timeout: a job with TTR 1 held and not released; another connection waiting
    # in reserve-with-timeout gets it when the TTR runs out, and releases it.
    w = worker(address, "slow")
    f.holders.append(w)
    slow = put("slow", b"too slow", pri=30, ttr=1)
    assert w.reserve()[0] == slow
    w2 = worker(address, "slow")
    f.holders.append(w2)
    assert w2.reserve(timeout=5) == (slow, b"too slow")
    # The TTR is 1 s for w2 too: on a loaded machine the release can come after it ran
    # out again (NOT_FOUND, the job ready once more). Then take the job back and release
    # it again; the counters the restart is checked against are read afterwards.
    for _ in range(100):
        if w2.cmd(f"release {slow} 31 0") == b"RELEASED":
            break
        w2.reserve_job(slow)
    else:
        raise AssertionError(f"job {slow} could not be released within its TTR 100 times")

    # Reserved at stop time: one touched, one just reserved, one released and reserved
    # again, one reserved by a connection that also holds a buried job.
    w = worker(address, "held")
    f.holders.append(w)
    touched = put("held", b"touched", pri=40, ttr=100)
    assert w.reserve()[0] == touched
    w.touch(touched)
    held = put("held", b"held", pri=41, ttr=100)
    assert w.reserve()[0] == held
    again = put("held", b"held again", pri=42, ttr=100)
    assert w.reserve()[0] == again
    w.release(again, 43, 0)
    assert w.reserve()[0] == again
    f.reserved_at_stop |= {touched, held, again}

    # Deleted jobs, from every state; the job with the highest id is deleted last.
    w = worker(address, "gone")
    f.holders.append(w)
    gone_ready = put("gone", b"deleted while ready")
    gone_delayed = put("gone", b"deleted while delayed", delay=100)
    gone_reserved = put("gone", b"deleted while reserved", pri=0)
    assert w.reserve()[0] == gone_ready
    w.delete(gone_ready)
    assert w.reserve()[0] == gone_reserved
    w.delete(gone_reserved)
    gone_buried = put("gone", b"deleted while buried")
    assert w.reserve()[0] == gone_buried
    w.bury(gone_buried, 1)
    p.delete(gone_delayed)
    p.delete(gone_buried)
    last = put("default", b"the highest id, deleted")
    p.delete(last)
    for job_id in (gone_ready, gone_delayed, gone_reserved, gone_buried, last):
        f.live.discard(job_id)
        f.deleted.add(job_id)
    return f


def record(address: tuple[str, int], f: Filled) -> None:
    """stats-job and body of every job, just before the stop."""
    with Client(address) as c:
        for job_id in sorted(f.live):
            stats = c.stats_job(job_id)
            body = c.peek(job_id)
            assert stats is not None and body is not None, job_id
            f.stats[job_id] = stats
            f.bodies[job_id] = body
        for job_id in f.deleted:
            assert c.stats_job(job_id) is None
        f.taken_at = time.monotonic()
    states = {s["state"] for s in f.stats.values()}
    assert states == {"ready", "delayed", "buried", "reserved"}, states
    assert {i for i, s in f.stats.items() if s["state"] == "reserved"} == f.reserved_at_stop
