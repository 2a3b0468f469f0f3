"""``beanpole.ShardedClient``: one queue spread over several servers.

* ``put(body, key=...)`` sends the job to the server chosen by rendezvous hashing of the
  key (each server scores ``blake2b(server, key)``, the highest wins), so adding a server
  moves only the keys it now wins, about 1/n of them; without a key, puts go round robin.
* Every job carries ``Job.server``; job commands (``delete``, ``release``, ...) go there.
* ``reserve(timeout)`` waits on every server at once: each waits in slices of
  ``reserve_slice`` seconds on its own thread, the first job wins, and a job that another
  server hands out meanwhile is released straight back with its own priority, so no job
  is held or lost. (A server still finishing its slice answers other calls afterwards.)
* ``put_many`` splits the items by server and pipelines to all of them concurrently.
* A server that cannot be reached raises ``ServerDownError`` naming it; with
  ``skip_down=True`` it is left out instead and puts go to the others.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import hashlib
import itertools
import ssl
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from beanpole.client.blocking import (
    DEFAULT_DELAY,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    DEFAULT_WINDOW,
    Address,
    Client,
    Job,
    format_address,
)
from beanpole.client.errors import (
    BatchError,
    ClientConnectionError,
    ServerDownError,
    TimedOutError,
)
from beanpole.client.tls import PathArg, client_tls

__all__ = ["ShardedClient", "rendezvous"]


def _score(server: str, key: str | bytes) -> int:
    raw = key.encode() if isinstance(key, str) else key
    digest = hashlib.blake2b(server.encode() + b"\0" + raw, digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous(servers: Sequence[str], key: str | bytes) -> str:
    """The server that owns ``key``: highest score wins (stable across processes)."""
    return max(servers, key=lambda s: _score(s, key))


class ShardedClient:
    """Clients to several servers used as one. Addresses, and the TLS options (``tls``,
    ``ca``, ``cert``, ``key``, ``server_name``, the same for every server), as for
    ``Client``."""

    def __init__(
        self,
        addresses: Iterable[Address],
        *,
        encoding: str | None = "utf-8",
        use: str = DEFAULT_TUBE,
        watch: str | Iterable[str] = DEFAULT_TUBE,
        timeout: float | None = None,
        skip_down: bool = False,
        reserve_slice: int = 1,
        tls: bool | ssl.SSLContext = False,
        ca: PathArg | None = None,
        cert: PathArg | None = None,
        key: PathArg | None = None,
        server_name: str | None = None,
    ) -> None:
        # Checked once here, so bad TLS files are one error, not a server marked down.
        client_tls(tls, ca, cert, key, server_name)
        self.servers = [format_address(a) for a in addresses]
        if not self.servers:
            raise ValueError("ShardedClient needs at least one address")
        self.skip_down = skip_down
        self.reserve_slice = max(1, reserve_slice)
        self._encoding = encoding
        self._options: dict[str, Any] = {
            "use": use,
            "watch": watch,
            "timeout": timeout,
            "tls": tls,
            "ca": ca,
            "cert": cert,
            "key": key,
            "server_name": server_name,
        }
        self._clients: dict[str, Client[Any]] = {}
        self._down: set[str] = set()
        self._rr = itertools.count()
        # Guards the set of clients and down servers; held only for dict updates.
        self._lock = threading.Lock()
        for server in self.servers:
            try:
                self._connect(server)
            except ServerDownError:
                if not skip_down:
                    self.close()
                    raise
        if not self._clients:
            raise ServerDownError("no server can be reached: " + ", ".join(self.servers))

    def __enter__(self) -> ShardedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for c in clients:
            c.close()

    # -- servers ---------------------------------------------------------------

    def _connect(self, server: str) -> Client[Any]:
        try:
            client: Client[Any] = Client(server, encoding=self._encoding, **self._options)
        except ClientConnectionError as err:
            self._mark_down(server)
            raise ServerDownError(f"server {server} is down: {err}", server) from err
        with self._lock:
            self._clients[server] = client
            self._down.discard(server)
        return client

    def _mark_down(self, server: str) -> None:
        with self._lock:
            self._down.add(server)
            client = self._clients.pop(server, None)
        if client is not None:
            client.close()

    def up(self) -> list[str]:
        """The servers in use now."""
        with self._lock:
            return [s for s in self.servers if s not in self._down]

    def client(self, server: str) -> Client[Any]:
        """The client of one server (connecting again if it was down)."""
        with self._lock:
            client = self._clients.get(server)
        if client is not None:
            return client
        if server not in self.servers:
            raise ValueError(f"{server} is not one of this client's servers")
        return self._connect(server)

    def _call(self, server: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(self.client(server), *args)
        except ClientConnectionError as err:
            self._mark_down(server)
            if isinstance(err, ServerDownError):
                raise
            raise ServerDownError(f"server {server} is down: {err}", server) from err

    def _choose(self, key: str | bytes | None, exclude: set[str] = frozenset()) -> str:  # type: ignore[assignment]
        candidates = [s for s in self.up() if s not in exclude] if self.skip_down else self.servers
        if not candidates:
            raise ServerDownError("every server is down: " + ", ".join(self.servers))
        if key is None:
            return candidates[next(self._rr) % len(candidates)]
        return rendezvous(candidates, key)

    # -- producing -------------------------------------------------------------

    def put(
        self,
        body: str | bytes,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        ttr: int = DEFAULT_TTR,
        *,
        key: str | bytes | None = None,
    ) -> Job[Any]:
        """Put a job; the ``Job`` (id, body and server) it became."""
        tried: set[str] = set()
        while True:
            server = self._choose(key, tried)
            try:
                job_id = self._call(server, Client.put, body, priority, delay, ttr)
            except ServerDownError:
                if not self.skip_down:
                    raise
                tried.add(server)
                continue
            return Job(job_id, body, server)

    def put_many(
        self,
        bodies: Iterable[Any],
        *,
        keys: Iterable[str | bytes] | None = None,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        ttr: int = DEFAULT_TTR,
        window: int = DEFAULT_WINDOW,
    ) -> list[tuple[str, int]]:
        """Put every body, split by server (by ``keys``, one per body, or round robin)
        and pipelined to every server at once; ``(server, id)`` per body, in order.
        The iterable is read ``window`` items per server at a time.

        A failure raises ``BatchError``: ``index`` is the first body not stored,
        ``reason`` its error (``ServerDownError`` naming a server that went away),
        ``ids`` and ``after`` the ``(server, id)`` pairs stored before and after it.
        With ``skip_down`` a server that goes away is left out and its unacknowledged
        bodies go to the others."""
        out: list[tuple[str, int]] = []
        it = iter(bodies)
        key_it = iter(keys) if keys is not None else None
        with ThreadPoolExecutor(max_workers=len(self.servers)) as pool:
            while True:
                chunk = list(itertools.islice(it, window * len(self.servers)))
                if not chunk:
                    return out
                chunk_keys: list[str | bytes | None] = (
                    [next(key_it) for _ in chunk] if key_it is not None else [None] * len(chunk)
                )
                try:
                    out += self._put_chunk(pool, chunk, chunk_keys, priority, delay, ttr, window)
                except BatchError as err:
                    raise BatchError(
                        str(err).replace(f"item {err.index}", f"item {err.index + len(out)}"),
                        err.index + len(out),
                        err.reason,
                        [*out, *err.ids],
                        [(i + len(out), v) for i, v in err.after],
                    ) from err.reason

    def _put_chunk(
        self,
        pool: ThreadPoolExecutor,
        chunk: list[Any],
        keys: list[str | bytes | None],
        priority: int,
        delay: int,
        ttr: int,
        window: int,
    ) -> list[tuple[str, int]]:
        result: list[tuple[str, int] | None] = [None] * len(chunk)
        pending = list(range(len(chunk)))
        excluded: set[str] = set()
        while pending:
            groups: dict[str, list[int]] = {}
            for i in pending:
                groups.setdefault(self._choose(keys[i], excluded), []).append(i)

            outcomes = list(
                pool.map(
                    lambda g: self._send_group(
                        g[0], g[1], chunk, result, priority, delay, ttr, window
                    ),
                    groups.items(),
                )
            )
            pending = []
            for server, left, failure in outcomes:
                if failure is None:
                    continue
                down = isinstance(failure.reason, ClientConnectionError)
                if not (self.skip_down and down):
                    raise self._chunk_failure(server, left, failure, result, down)
                excluded.add(server)
                pending += left
        return [r for r in result if r is not None]

    @staticmethod
    def _chunk_failure(
        server: str,
        left: list[int],
        failure: BatchError,
        result: list[tuple[str, int] | None],
        down: bool,
    ) -> BatchError:
        """The BatchError for a chunk: indexes within the chunk (``put_many`` shifts
        them), ``(server, id)`` pairs acknowledged before and after the failing item."""
        first = min(left) if left else len(result)
        reason: BaseException = failure.reason
        if down:
            reason = ServerDownError(f"server {server} is down: {failure.reason}", server)
        ids: list[object] = [r for r in result[:first] if r is not None]
        after: list[tuple[int, object]] = [
            (i, r) for i, r in enumerate(result) if i > first and r is not None
        ]
        return BatchError(
            f"put_many stopped at item {first} on server {server}: {reason}",
            first,
            reason,
            ids,
            after,
        )

    def _send_group(
        self,
        server: str,
        idx: list[int],
        chunk: list[Any],
        result: list[tuple[str, int] | None],
        priority: int,
        delay: int,
        ttr: int,
        window: int,
    ) -> tuple[str, list[int], BatchError | None]:
        """Put the items ``idx`` of ``chunk`` on one server; fills ``result``."""
        try:
            ids = self._call(
                server,
                lambda c: c.put_many(
                    [chunk[i] for i in idx], priority=priority, delay=delay, ttr=ttr, window=window
                ),
            )
        except BatchError as err:
            # A Client's put_many reports plain int ids.
            for j, job_id in enumerate(err.ids):
                result[idx[j]] = (server, cast(int, job_id))
            for j, job_id in err.after:
                result[idx[j]] = (server, cast(int, job_id))
            if isinstance(err.reason, ClientConnectionError):
                self._mark_down(server)
            return server, [i for i in idx if result[i] is None], err
        for i, job_id in zip(idx, ids, strict=True):
            result[i] = (server, job_id)
        return server, [], None

    # -- consuming -------------------------------------------------------------

    def reserve(self, timeout: int | None = None) -> Job[Any]:
        """The first job any server hands out within ``timeout`` seconds (None: wait
        for ever). Raises ``TimedOutError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            # Ready jobs first, server by server, without waiting.
            for server in self._rotation():
                job = self._try(server, 0)
                if job is not None:
                    return job
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimedOutError("TIMED_OUT")
            wait = (
                self.reserve_slice if left is None else max(1, min(self.reserve_slice, int(left)))
            )
            job = self._wait_all(wait)
            if job is not None:
                return job

    def _rotation(self) -> list[str]:
        servers = self.up() if self.skip_down else list(self.servers)
        if not servers:
            raise ServerDownError("every server is down: " + ", ".join(self.servers))
        start = next(self._rr) % len(servers)
        return servers[start:] + servers[:start]

    def _try(self, server: str, wait: int) -> Job[Any] | None:
        try:
            job: Job[Any] = self._call(server, Client.reserve, wait)
        except TimedOutError:
            return None
        except ServerDownError:
            if self.skip_down:
                return None
            raise
        job.server = server
        return job

    def _wait_all(self, wait: int) -> Job[Any] | None:
        """One slice of waiting on every server at once."""
        servers = self._rotation()
        won: list[Job[Any]] = []
        failed: list[BaseException] = []
        # Counts the waiting threads that have finished: the caller wakes on each one.
        finished = threading.Semaphore(0)
        # Decides the single winner; held only to read and set ``won``.
        claim = threading.Lock()

        def wait_on(server: str) -> None:
            try:
                job = self._try(server, wait)
                if job is not None:
                    with claim:
                        first = not won
                        if first:
                            won.append(job)
                    if not first:
                        self._give_back(job)
            except BaseException as err:
                failed.append(err)
            finally:
                finished.release()

        threads = [threading.Thread(target=wait_on, args=(s,), daemon=True) for s in servers]
        for t in threads:
            t.start()
        count = 0
        while count < len(threads):
            finished.acquire()
            count += 1
            if won or failed:
                break
        if won:
            return won[0]
        if failed:
            raise failed[0]
        return None

    def _give_back(self, job: Job[Any]) -> None:
        """Release a job nobody asked for, with its own priority."""
        assert job.server is not None
        client = self.client(job.server)
        pri = client.stats_job(job.id)["pri"]
        client.release(job.id, priority=int(pri), delay=0)

    # -- job commands, routed by Job.server ---------------------------------------

    @staticmethod
    def _where(job: Job[Any]) -> str:
        if not isinstance(job, Job) or job.server is None:
            raise TypeError("a ShardedClient needs the Job (with .server) to find a job")
        return job.server

    def delete(self, job: Job[Any]) -> None:
        self._call(self._where(job), Client.delete, job.id)

    def release(
        self, job: Job[Any], priority: int = DEFAULT_PRIORITY, delay: int = DEFAULT_DELAY
    ) -> None:
        self._call(self._where(job), Client.release, job.id, priority, delay)

    def bury(self, job: Job[Any], priority: int = DEFAULT_PRIORITY) -> None:
        self._call(self._where(job), Client.bury, job.id, priority)

    def touch(self, job: Job[Any]) -> None:
        self._call(self._where(job), Client.touch, job.id)

    def kick_job(self, job: Job[Any]) -> None:
        self._call(self._where(job), Client.kick_job, job.id)

    def stats_job(self, job: Job[Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(self._where(job), Client.stats_job, job.id)
        return result

    def peek(self, job: Job[Any]) -> Job[Any]:
        found: Job[Any] = self._call(self._where(job), Client.peek, job.id)
        found.server = job.server
        return found

    # -- every server -------------------------------------------------------------

    def _each(self, fn: Any, *args: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for server in self.up() if self.skip_down else self.servers:
            try:
                out[server] = self._call(server, fn, *args)
            except ServerDownError:
                if not self.skip_down:
                    raise
        return out

    def use(self, tube: str) -> None:
        self._options["use"] = tube
        self._each(Client.use, tube)

    def watch(self, tube: str) -> None:
        self._each(Client.watch, tube)

    def ignore(self, tube: str) -> None:
        self._each(Client.ignore, tube)

    def kick(self, bound: int) -> int:
        """Kick up to ``bound`` jobs on every server; the total kicked."""
        return sum(self._each(Client.kick, bound).values())

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each server's stats, keyed by server."""
        return self._each(Client.stats)

    def stats_tube(self, tube: str) -> dict[str, dict[str, Any]]:
        return self._each(Client.stats_tube, tube)
