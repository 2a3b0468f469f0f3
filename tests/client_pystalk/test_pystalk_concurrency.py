"""pystalk from several threads and clients at once: producers, workers, wake-ups."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from pystalk.client import Job  # type: ignore[import-untyped]

from client_common import wait_until
from pystalk_common import inserted, open_client
from servers import Running


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
