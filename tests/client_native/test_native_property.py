"""Random command sequences run through ``beanpole.Client`` and through greenstalk, each
against its own fresh server of the same kind; every result (value, or error class name)
must be the same. Times (age, time-left) are left out; nothing here waits on the clock."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import greenstalk
import pytest

from beanpole.client import Client
from servers import Running, start

pytestmark = pytest.mark.timeout(120)

TUBES = ["default", "a", "b"]
BODIES = ["", "x", "naïve", "日本", "a\r\nb", "nul\x00", "long" * 50]
JOB_KEYS = ("id", "tube", "state", "pri", "delay", "ttr", "reserves", "releases", "buries", "kicks")
TUBE_KEYS = (
    "name",
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "total-jobs",
    "current-watching",
    "cmd-delete",
    "cmd-pause-tube",
)

Op = tuple[str, Callable[[Any], Any], Callable[[Any], Any]]


def outcome(call: Callable[[Any], Any], client: Any) -> Any:
    try:
        value = call(client)
    except Exception as e:  # the class name is what both clients must agree on
        return ("error", type(e).__name__)
    if isinstance(value, greenstalk.Job) or hasattr(value, "body"):
        return ("job", value.id, value.body)
    return value


def random_op(rng: random.Random, max_id: int) -> Op:
    job_id = rng.randint(1, max_id + 2)
    tube = rng.choice(TUBES)
    pri = rng.choice([0, 1, 1024, 2**16, 2**32 - 1])
    gjob = greenstalk.Job(job_id, "")
    if rng.random() < 0.25:
        body = rng.choice(BODIES)
        delay = rng.choice([0, 0, 0, 100])
        ttr = rng.choice([60, 120])
        return (
            f"put {body!r} {pri} {delay} {ttr}",
            lambda c: c.put(body, pri, delay, ttr),
            lambda g: g.put(body, pri, delay, ttr),
        )
    table: list[Op] = [
        ("reserve 0", lambda c: c.reserve(0), lambda g: g.reserve(0)),
        (f"reserve-job {job_id}", lambda c: c.reserve_job(job_id), lambda g: g.reserve_job(job_id)),
        (f"delete {job_id}", lambda c: c.delete(job_id), lambda g: g.delete(job_id)),
        (
            f"release {job_id} {pri}",
            lambda c: c.release(job_id, pri, 0),
            lambda g: g.release(gjob, pri, 0),
        ),
        (f"bury {job_id} {pri}", lambda c: c.bury(job_id, pri), lambda g: g.bury(gjob, pri)),
        (f"touch {job_id}", lambda c: c.touch(job_id), lambda g: g.touch(gjob)),
        ("kick 2", lambda c: c.kick(2), lambda g: g.kick(2)),
        (f"kick-job {job_id}", lambda c: c.kick_job(job_id), lambda g: g.kick_job(job_id)),
        (f"peek {job_id}", lambda c: c.peek(job_id), lambda g: g.peek(job_id)),
        ("peek-ready", lambda c: c.peek_ready(), lambda g: g.peek_ready()),
        ("peek-delayed", lambda c: c.peek_delayed(), lambda g: g.peek_delayed()),
        ("peek-buried", lambda c: c.peek_buried(), lambda g: g.peek_buried()),
        (f"use {tube}", lambda c: c.use(tube), lambda g: g.use(tube)),
        (f"watch {tube}", lambda c: c.watch(tube), lambda g: g.watch(tube)),
        (f"ignore {tube}", lambda c: c.ignore(tube), lambda g: g.ignore(tube)),
        ("using", lambda c: c.using(), lambda g: g.using()),
        ("watching", lambda c: sorted(c.watching()), lambda g: sorted(g.watching())),
        ("tubes", lambda c: sorted(c.tubes()), lambda g: sorted(g.tubes())),
        (
            f"stats-job {job_id}",
            lambda c: {k: c.stats_job(job_id)[k] for k in JOB_KEYS},
            lambda g: {k: g.stats_job(job_id)[k] for k in JOB_KEYS},
        ),
        (
            f"stats-tube {tube}",
            lambda c: {k: c.stats_tube(tube)[k] for k in TUBE_KEYS},
            lambda g: {k: g.stats_tube(tube)[k] for k in TUBE_KEYS},
        ),
    ]
    return rng.choice(table)


@pytest.mark.parametrize("seed", range(6))
def test_same_results_as_greenstalk(server_kind: str, seed: int) -> None:
    rng = random.Random(seed)
    with start(server_kind) as ours, start(server_kind) as theirs:
        run(rng, ours, theirs)


def run(rng: random.Random, ours: Running, theirs: Running) -> None:
    with Client(ours.address, timeout=30) as c, greenstalk.Client(theirs.address) as g:
        max_id = 0
        history: list[str] = []
        for _ in range(300):
            name, mine, reference = random_op(rng, max_id)
            history.append(name)
            got = outcome(mine, c)
            want = outcome(reference, g)
            assert got == want, "\n".join(history[-15:])
            if name.startswith("put") and isinstance(want, int):
                max_id = max(max_id, want)

        # Both servers end in the same state.
        def tube_stats(client: Any) -> list[dict[str, Any]]:
            return [{k: client.stats_tube(t)[k] for k in TUBE_KEYS} for t in client.tubes()]

        assert outcome(tube_stats, c) == outcome(tube_stats, g)
