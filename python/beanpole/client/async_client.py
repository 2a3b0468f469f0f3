"""``beanpole.AsyncClient``: ``beanpole.Client``'s methods as coroutines, for asyncio.

Each call runs the blocking native call on the client's own single worker thread
(``loop.run_in_executor``). That is enough here because the native calls release the
GIL for all their network waits, so the event loop keeps running at full speed while a
call waits; one thread per client keeps the commands of one connection in order, as the
protocol needs. A native asyncio path would need a second event loop (tokio) bridged
into asyncio for no gain in throughput, since batches already pipeline in Rust.

Cancelling a coroutine that is waiting on the server (a ``reserve``, say) closes the
connection: the protocol has no way to take a command back, and closing is what makes
the server give back any job it reserved for us, so nothing is held or lost. The client
then raises ``NotConnectedError``; make a new one.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from beanpole.client.blocking import (
    DEFAULT_DELAY,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    DEFAULT_WINDOW,
    Address,
    Client,
    Job,
    JobOrId,
    PerJob,
)
from beanpole.client.tls import PathArg, client_tls

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """``AsyncClient(address, *, encoding="utf-8", use="default", watch="default",
    timeout=None, tls=False, ca=None, cert=None, key=None, server_name=None)``:
    connects on first use (or in ``async with``). The TLS options are
    ``Client``'s; they are checked here, so a bad combination fails at once rather
    than on first use."""

    def __init__(
        self,
        address: Address,
        *,
        encoding: str | None = "utf-8",
        use: str = DEFAULT_TUBE,
        watch: str | Iterable[str] = DEFAULT_TUBE,
        timeout: float | None = None,
        tls: bool | ssl.SSLContext = False,
        ca: PathArg | None = None,
        cert: PathArg | None = None,
        key: PathArg | None = None,
        server_name: str | None = None,
    ) -> None:
        client_tls(tls, ca, cert, key, server_name)
        self._connect: Callable[[], Client[Any]] = functools.partial(
            Client,
            address,
            encoding=encoding,
            use=use,
            watch=watch,
            timeout=timeout,
            tls=tls,
            ca=ca,
            cert=cert,
            key=key,
            server_name=server_name,
        )
        self._client: Client[Any] | None = None
        # One worker: the commands of a connection must run one after another.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="beanpole-client")

    async def __aenter__(self) -> AsyncClient:
        await self._run(lambda c: None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _connected(self) -> Client[Any]:
        if self._client is None:
            self._client = self._connect()
        return self._client

    async def _run(self, call: Callable[[Client[Any]], T]) -> T:
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._pool, lambda: call(self._connected()))
        try:
            return await fut
        except asyncio.CancelledError:
            # The call may still be running, or may have finished with a result no one
            # will see (a reserved job): closing covers both.
            if self._client is not None:
                self._client.interrupt()
            raise

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._client is not None:
            self._client.interrupt()
            await asyncio.get_running_loop().run_in_executor(self._pool, self._client.close)
        self._pool.shutdown(wait=False)

    async def put(
        self,
        body: str | bytes,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        ttr: int = DEFAULT_TTR,
    ) -> int:
        return await self._run(lambda c: c.put(body, priority, delay, ttr))

    async def reserve(self, timeout: int | None = None) -> Job[Any]:
        return await self._run(lambda c: c.reserve(timeout))

    async def reserve_job(self, id: int) -> Job[Any]:
        return await self._run(lambda c: c.reserve_job(id))

    async def delete(self, job: JobOrId) -> None:
        await self._run(lambda c: c.delete(job))

    async def release(
        self, job: JobOrId, priority: int = DEFAULT_PRIORITY, delay: int = DEFAULT_DELAY
    ) -> None:
        await self._run(lambda c: c.release(job, priority, delay))

    async def bury(self, job: JobOrId, priority: int = DEFAULT_PRIORITY) -> None:
        await self._run(lambda c: c.bury(job, priority))

    async def touch(self, job: JobOrId) -> None:
        await self._run(lambda c: c.touch(job))

    async def kick(self, bound: int) -> int:
        return await self._run(lambda c: c.kick(bound))

    async def kick_job(self, job: JobOrId) -> None:
        await self._run(lambda c: c.kick_job(job))

    async def peek(self, id: int) -> Job[Any]:
        return await self._run(lambda c: c.peek(id))

    async def peek_ready(self) -> Job[Any]:
        return await self._run(lambda c: c.peek_ready())

    async def peek_delayed(self) -> Job[Any]:
        return await self._run(lambda c: c.peek_delayed())

    async def peek_buried(self) -> Job[Any]:
        return await self._run(lambda c: c.peek_buried())

    async def use(self, tube: str) -> None:
        await self._run(lambda c: c.use(tube))

    async def using(self) -> str:
        return await self._run(lambda c: c.using())

    async def watch(self, tube: str) -> int:
        return await self._run(lambda c: c.watch(tube))

    async def ignore(self, tube: str) -> int:
        return await self._run(lambda c: c.ignore(tube))

    async def watching(self) -> list[str]:
        return await self._run(lambda c: c.watching())

    async def tubes(self) -> list[str]:
        return await self._run(lambda c: c.tubes())

    async def stats(self) -> dict[str, Any]:
        return await self._run(lambda c: c.stats())

    async def stats_tube(self, tube: str) -> dict[str, Any]:
        return await self._run(lambda c: c.stats_tube(tube))

    async def stats_job(self, job: JobOrId) -> dict[str, Any]:
        return await self._run(lambda c: c.stats_job(job))

    async def pause_tube(self, tube: str, delay: int) -> None:
        await self._run(lambda c: c.pause_tube(tube, delay))

    async def put_many(
        self,
        bodies: Iterable[Any],
        *,
        priority: PerJob = DEFAULT_PRIORITY,
        delay: PerJob = DEFAULT_DELAY,
        ttr: PerJob = DEFAULT_TTR,
        tube: str | None = None,
        window: int = DEFAULT_WINDOW,
    ) -> list[int]:
        """As ``Client.put_many``; the iterable is consumed on the worker thread."""
        return await self._run(
            lambda c: c.put_many(
                bodies, priority=priority, delay=delay, ttr=ttr, tube=tube, window=window
            )
        )

    async def reserve_many(
        self, n: int, timeout: int = 0, *, window: int = DEFAULT_WINDOW
    ) -> list[Job[Any]]:
        return await self._run(lambda c: c.reserve_many(n, timeout, window=window))

    async def delete_many(self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW) -> None:
        await self._run(lambda c: c.delete_many(ids, window=window))

    async def release_many(
        self,
        ids: Iterable[JobOrId],
        *,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        await self._run(
            lambda c: c.release_many(ids, priority=priority, delay=delay, window=window)
        )

    async def bury_many(
        self,
        ids: Iterable[JobOrId],
        *,
        priority: int = DEFAULT_PRIORITY,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        await self._run(lambda c: c.bury_many(ids, priority=priority, window=window))
