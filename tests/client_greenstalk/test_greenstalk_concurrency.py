"""greenstalk from several threads and clients at once: producers, workers, wake-ups."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import greenstalk
import pytest

from client_common import wait_until
from servers import Running


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
