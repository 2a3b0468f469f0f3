"""pystalk's ProductionPool over two servers: round robin, fail-over, errors not retried."""

from __future__ import annotations

import pystalk  # type: ignore[import-untyped]
import pytest
from pystalk.pool import NoMoreClients  # type: ignore[import-untyped]

from pystalk_common import connect, inserted, open_client, raises_beanstalk
from servers import start


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
