"""ShardedClient over three real servers (two beanpole, one beanstalkd when installed):
stable key placement, round robin, routing by Job.server, reserve over all servers with
nothing held or lost, concurrent put_many, and one server stopped mid-run."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator

import pytest

from beanpole.client import Client
from beanpole.client import errors as errors
from beanpole.client.sharded import ShardedClient, rendezvous
from native_common import stop_server
from servers import Running, start

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def three() -> Iterator[list[Running]]:
    kinds = ["beanpole", "beanpole", "beanstalkd" if shutil.which("beanstalkd") else "beanpole"]
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(start(k)) for k in kinds]


def addr(r: Running) -> str:
    return f"{r.host}:{r.port}"


def test_rendezvous_moves_about_one_in_n_keys() -> None:
    servers = [f"s{i}:1" for i in range(4)]
    keys = [f"key-{i}" for i in range(4000)]
    before = {k: rendezvous(servers, k) for k in keys}
    assert {k: rendezvous(list(reversed(servers)), k) for k in keys} == before
    after = {k: rendezvous([*servers, "s4:1"], k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "s4:1" for k in moved)
    assert 0.12 < len(moved) / len(keys) < 0.28  # about 1/5
    counts = {s: list(before.values()).count(s) for s in servers}
    assert min(counts.values()) > 800


def test_keys_and_round_robin(three: list[Running]) -> None:
    with ShardedClient([r.address for r in three]) as sc:
        jobs = [sc.put(f"k{i}", key="user-42") for i in range(5)]
        assert len({j.server for j in jobs}) == 1
        assert jobs[0].server == rendezvous(sc.servers, "user-42")
        spread = [sc.put("rr").server for _ in range(6)]
        assert sorted(spread) == sorted(sc.servers * 2)
        job = jobs[0]
        assert sc.peek(job).body == "k0"
        assert sc.stats_job(job)["state"] == "ready"
        with pytest.raises(TypeError):
            sc.delete(job.id)  # type: ignore[arg-type]


def test_reserve_over_all_servers_holds_nothing(three: list[Running]) -> None:
    with ShardedClient([r.address for r in three]) as sc:
        with pytest.raises(errors.TimedOutError):
            sc.reserve(0)
        got = []
        # Put from outside while the sharded client waits on every server.
        with Client(three[2].address) as producer:
            timer = threading.Timer(0.3, lambda: producer.put("late", priority=77))
            timer.start()
            job = sc.reserve(timeout=10)
            timer.join()
        assert (job.body, job.server) == ("late", addr(three[2]))
        got.append(job)
        sc.delete(job)
        # Jobs on two servers at once: one is returned, the other stays available.
        with Client(three[0].address) as a, Client(three[1].address) as b:
            a.put("a", priority=5)
            b.put("b", priority=6)
        first = sc.reserve(timeout=5)
        second = sc.reserve(timeout=5)
        assert {first.body, second.body} == {"a", "b"}
        sc.release(first, priority=5)
        sc.release(second, priority=6)
        for r in three[:2]:
            with Client(r.address) as c:
                st = c.stats()
                assert st["current-jobs-reserved"] == 0 and st["current-jobs-ready"] == 1


def test_racing_jobs_are_given_back(three: list[Running]) -> None:
    """Jobs put on every server while reserve waits: one is returned, the others are
    released at once with their own priority."""
    with ShardedClient([r.address for r in three]) as sc:
        producers = [Client(r.address) for r in three]
        barrier = threading.Barrier(len(producers))

        def put(c: Client[str], i: int) -> None:
            barrier.wait()
            c.put(f"job{i}", priority=100 + i)

        threads = [threading.Timer(0.3, put, args=(c, i)) for i, c in enumerate(producers)]
        for t in threads:
            t.start()
        job = sc.reserve(timeout=10)
        for t in threads:
            t.join()
        for c in producers:
            c.close()
        others = []
        for _ in range(2):
            others.append(sc.reserve(timeout=5))
        bodies = sorted([job.body, *[o.body for o in others]])
        assert bodies == ["job0", "job1", "job2"]
        for o in others:
            assert sc.stats_job(o)["pri"] == 100 + int(o.body[-1])
            sc.delete(o)
        sc.delete(job)


def test_put_many_concurrent_and_in_order(three: list[Running]) -> None:
    with ShardedClient([r.address for r in three]) as sc:
        placed = sc.put_many((f"b{i}" for i in range(3000)), window=100)
        assert len(placed) == 3000
        per_server = {s: [i for srv, i in placed if srv == s] for s in sc.servers}
        assert all(len(v) == 1000 for v in per_server.values())
        keyed = sc.put_many(["x", "y"], keys=["k1", "k1"])
        assert keyed[0][0] == keyed[1][0] == rendezvous(sc.servers, "k1")
        for r in three:
            with Client(r.address) as c:
                assert c.stats()["current-jobs-ready"] in (1000, 1002)


def test_one_server_stopped_mid_run(three: list[Running]) -> None:
    addresses = [r.address for r in three]
    with ShardedClient(addresses) as strict:
        strict.put("one")
        stop_server(three[1])
        with pytest.raises(errors.ServerDownError) as info:
            for _ in range(3):
                strict.put("more")
        assert info.value.server == addr(three[1])
        assert addr(three[1]) in str(info.value)
    with ShardedClient(addresses, skip_down=True) as lenient:
        assert addr(three[1]) not in lenient.up()
        jobs = [lenient.put(f"p{i}") for i in range(4)]
        assert {j.server for j in jobs} == {addr(three[0]), addr(three[2])}
        placed = lenient.put_many(f"m{i}" for i in range(50))
        assert {s for s, _ in placed} == {addr(three[0]), addr(three[2])}
        job = lenient.reserve(timeout=1)
        lenient.delete(job)


def test_server_stopped_during_put_many_with_skip_down(three: list[Running]) -> None:
    addresses = [r.address for r in three]
    with ShardedClient(addresses, skip_down=True) as sc:

        def bodies() -> Iterator[str]:
            for i in range(6000):
                if i == 3000:
                    stop_server(three[0])
                yield f"b{i}"

        placed = sc.put_many(bodies(), window=200)
        assert len(placed) == 6000
        assert len(set(placed)) == 6000
        alive = 0
        for r in three[1:]:
            with Client(r.address) as c:
                alive += c.stats()["current-jobs-ready"]
        on_dead = sum(1 for s, _ in placed if s == addr(three[0]))
        assert alive + on_dead == 6000


def test_server_stopped_during_put_many_without_skip_down(three: list[Running]) -> None:
    addresses = [r.address for r in three]
    with ShardedClient(addresses) as sc:

        def bodies() -> Iterator[str]:
            for i in range(3000):
                if i == 1500:
                    stop_server(three[1])
                yield f"b{i}"

        with pytest.raises(errors.BatchError) as info:
            sc.put_many(bodies(), window=100)
        err = info.value
        assert isinstance(err.reason, errors.ServerDownError)
        assert err.reason.server == addr(three[1])
        assert addr(three[1]) in str(err)
        assert 1200 <= err.index <= 1800
        stored = [*err.ids, *(v for _, v in err.after)]
        assert len(set(stored)) == len(stored)
        assert all(isinstance(p, tuple) and len(p) == 2 for p in stored)
        # Everything reported as stored on a live server is there, and nothing else.
        for r in (three[0], three[2]):
            with Client(r.address) as c:
                mine = sum(1 for s, _ in stored if s == addr(r))  # type: ignore[misc]
                assert c.stats()["current-jobs-ready"] == mine
