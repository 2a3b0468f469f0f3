"""AsyncClient against both servers: the same results as Client, concurrent coroutines,
and cancelling a waiting reserve gives the job back."""

from __future__ import annotations

import asyncio
import time

import pytest

from beanpole.client import Client
from beanpole.client import errors as errors
from beanpole.client.async_client import AsyncClient
from servers import Running

pytestmark = pytest.mark.timeout(60)


async def waiting_becomes(c: AsyncClient, want: int) -> None:
    """Poll ``current-waiting`` until it is ``want``; fail after 10 s."""
    deadline = time.monotonic() + 10
    while (now := (await c.stats())["current-waiting"]) != want:
        assert time.monotonic() < deadline, f"current-waiting stayed {now}, not {want}"
        await asyncio.sleep(0.01)


def test_async_round_trip(any_server: Running) -> None:
    async def main() -> None:
        async with AsyncClient(any_server.address) as c:
            job_id = await c.put("hello", priority=3)
            assert (await c.peek_ready()).id == job_id
            job = await c.reserve(timeout=1)
            assert job.body == "hello"
            await c.release(job, priority=4)
            job = await c.reserve_job(job_id)
            await c.bury(job, 4)
            assert (await c.peek_buried()).id == job_id
            assert await c.kick(1) == 1
            assert (await c.stats_job(job_id))["pri"] == 4
            await c.use("t")
            assert await c.using() == "t"
            assert await c.watch("t") == 2
            assert await c.ignore("t") == 1
            assert "t" in await c.tubes()
            assert (await c.stats_tube("t"))["current-using"] == 1
            ids = await c.put_many(["a", "b"])
            assert len(ids) == 2 and job_id < ids[0] < ids[1]
            await c.pause_tube("t", 0)
            assert sorted(await c.watching()) == ["default"]
            jobs = await c.reserve_many(10)
            assert sorted(j.body for j in jobs) == ["hello"]
            await c.delete_many(jobs)
            # "a" and "b" went to tube t, which is not watched: they are still ready.
            assert (await c.stats_tube("default"))["current-jobs-ready"] == 0
            assert (await c.stats_tube("t"))["current-jobs-ready"] == 2
            assert (await c.stats())["current-jobs-ready"] == 2
            with pytest.raises(errors.TimedOutError):
                await c.reserve(timeout=0)
            with pytest.raises(errors.NotFoundError):
                await c.delete(99999)

    asyncio.run(main())


def test_many_coroutines_share_the_loop(any_server: Running) -> None:
    async def main() -> list[int]:
        producer = AsyncClient(any_server.address)
        consumer = AsyncClient(any_server.address)
        waiting = asyncio.create_task(consumer.reserve(timeout=10))
        ticks = 0
        for _ in range(5):  # the loop keeps running while the reserve waits
            await asyncio.sleep(0.01)
            ticks += 1
        await producer.put("wake up")
        job = await waiting
        await consumer.delete(job)
        await producer.close()
        await consumer.close()
        return [ticks, job.id]

    ticks, job_id = asyncio.run(main())
    assert ticks == 5 and job_id == 1


def test_cancelled_reserve_gives_the_job_back(any_server: Running) -> None:
    async def main() -> None:
        c = AsyncClient(any_server.address)
        await c.stats()
        watcher = AsyncClient(any_server.address)
        task = asyncio.create_task(c.reserve())
        await waiting_becomes(watcher, 1)  # the reserve reached the server
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(errors.ClientConnectionError):
            await c.stats()
        await c.close()
        await waiting_becomes(watcher, 0)  # the server saw the connection go
        await watcher.close()

    asyncio.run(main())
    with Client(any_server.address) as c:
        c.put("after cancel")
        assert c.reserve(timeout=1).body == "after cancel"
