"""The servers a dashboard shows: an embedded :class:`beanpole.Server` (its admin
calls, in process) or a remote beanstalkd-protocol server (the protocol, for stock
beanstalkd through ``beanpole exporter``). Both give the same values, keyed as
``beanpole stats --format json`` keys them.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, ParamSpec, Protocol, TypeVar

from beanpole.client.snapshot import NotFoundError, StatValue, TubeRow, row_of

if TYPE_CHECKING:
    from beanpole.addr import Address
    from beanpole.client.blocking import Client
    from beanpole.server.embedded import Server

__all__ = [
    "BODY_SHOWN",
    "STATES",
    "ActionError",
    "LocalSource",
    "Peeked",
    "RemoteSource",
    "Source",
]

#: Bytes of a body the dashboard shows; the rest is cut (its size is still given).
BODY_SHOWN: Final = 4096
#: Job states a tube's next job is looked at in, and that a clear takes.
STATES: Final = ("ready", "delayed", "buried")
#: Jobs deleted per acquisition of the store lock (or per pipelined batch) by a clear.
CLEAR_BATCH: Final = 1000

Stats = dict[str, StatValue]
_P = ParamSpec("_P")
_R = TypeVar("_R")


class ActionError(Exception):
    """An action the server refused (a reserved job, a job that cannot be kicked, no
    room in the log)."""


@dataclass(frozen=True)
class Peeked:
    """A job looked at: its id, its body's size and at most :data:`BODY_SHOWN` of it."""

    id: int
    size: int
    head: bytes


class Source(Protocol):
    """One server the dashboard watches and acts on."""

    name: str
    #: Seconds a snapshot may be shared by the requests that want one.
    max_age: float

    def snapshot(self) -> tuple[Stats, list[TubeRow]]:
        """``stats`` and every tube's ``stats-tube`` as a row (tuples: a page's
        dicts are made only for the tubes shown)."""

    def server_stats(self) -> Stats:
        """``stats`` alone (``current-tubes`` counts the tubes)."""

    def tube(self, name: str) -> Stats: ...
    def job(self, id: int) -> Stats: ...
    def peek(self, tube: str, state: str) -> Peeked | None: ...
    def peek_job(self, id: int) -> Peeked: ...
    def kick(self, tube: str, bound: int) -> int: ...
    def kick_job(self, id: int) -> None: ...
    def delete(self, id: int) -> None: ...
    def pause(self, tube: str, seconds: int) -> None: ...
    def clear(self, tube: str, state: str, limit: int) -> int: ...


class LocalSource:
    """An embedded server: every call is one of its in-process admin calls (the work in
    Rust under the store lock), so hooks see the actions' events."""

    max_age = 0.0  # a snapshot is one acquisition of the store lock

    def __init__(self, server: Server, name: str = "local") -> None:
        self.server = server
        self.name = name

    def snapshot(self) -> tuple[Stats, list[TubeRow]]:
        snap = self.server.snapshot()
        return snap.server, snap.tubes

    def server_stats(self) -> Stats:
        # A snapshot keeping no tube: the same keys as ``snapshot``'s (the log's
        # health included) without a row per tube.
        return self.server.snapshot(0).server

    def tube(self, name: str) -> Stats:
        return self.server.tube_stats(name)

    def job(self, id: int) -> Stats:
        return self.server.job_stats(id)

    def peek(self, tube: str, state: str) -> Peeked | None:
        found = _native(self.server.admin().peek, tube, state, BODY_SHOWN)
        return None if found is None else Peeked(*found)

    def peek_job(self, id: int) -> Peeked:
        return Peeked(*_native(self.server.admin().peek_job, id, BODY_SHOWN))

    def kick(self, tube: str, bound: int) -> int:
        return _native(self.server.admin().kick, tube, bound)

    def kick_job(self, id: int) -> None:
        _native(self.server.admin().kick_job, id)

    def delete(self, id: int) -> None:
        _native(self.server.admin().delete, id)

    def pause(self, tube: str, seconds: int) -> None:
        _native(self.server.admin().pause, tube, seconds)

    def clear(self, tube: str, state: str, limit: int) -> int:
        admin = self.server.admin()
        deleted = 0
        while deleted < limit:
            batch = min(CLEAR_BATCH, limit - deleted)
            n = _native(admin.clear, tube, state, batch)
            deleted += n
            if n < batch:
                break
        return deleted


def _native(call: Callable[_P, _R], *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """A native admin call: a missing tube or job becomes NotFoundError, a refusal
    (reserved job, job not kickable, no room in the log) ActionError."""
    try:
        return call(*args, **kwargs)
    except KeyError as err:
        raise NotFoundError(*err.args) from None
    except (ValueError, OSError) as err:
        raise ActionError(str(err)) from None


class RemoteSource:
    """A server reached over the protocol (stock beanstalkd or beanpole): stats through
    pipelined ``stats-tube`` on one connection, jobs and actions through one
    :class:`beanpole.Client`. Each connection has a lock, so one request at a time
    uses it (``use`` then ``peek-ready`` must not interleave with another thread's);
    when both are needed the client's is taken first."""

    #: A snapshot is a pipelined exchange with every tube: viewers polling within
    #: this share one.
    max_age = 0.25

    def __init__(self, address: Address, name: str, timeout: float = 5.0) -> None:
        from beanpole.client.stats import StatsClient

        self.address = address
        self.name = name
        self.timeout = timeout
        self._client: Client[bytes] | None = None
        self._lock = threading.Lock()
        # Reconnects by itself after an error.
        self._stats = StatsClient(address, timeout=timeout)
        self._stats_lock = threading.Lock()

    def snapshot(self) -> tuple[Stats, list[TubeRow]]:
        with self._stats_lock:
            server, tubes = self._stats.snapshot()
        return server, [row_of(t) for t in tubes]

    def server_stats(self) -> Stats:
        with self._stats_lock:
            return self._stats.stats()

    def tube(self, name: str) -> Stats:
        with self._stats_lock:
            return self._stats.stats_tube(name)

    def job(self, id: int) -> Stats:
        with self._stats_lock:
            return self._stats.stats_job(id)

    def _with_client(self, work: Callable[[Client[bytes]], _R]) -> _R:
        from beanpole.client.blocking import Client, ClientConnectionError
        from beanpole.client.blocking import NotFoundError as WireNotFound

        with self._lock:
            try:
                if self._client is None:
                    address = self.address
                    target = address if isinstance(address, tuple) else f"unix:{address}"
                    self._client = Client(target, encoding=None, timeout=self.timeout)
                return work(self._client)
            except WireNotFound as err:
                raise NotFoundError(str(err) or "not found") from None
            except ClientConnectionError:
                client, self._client = self._client, None
                if client is not None:
                    client.close()
                raise

    def peek(self, tube: str, state: str) -> Peeked | None:
        from beanpole.client.blocking import NotFoundError as WireNotFound

        def work(c: Client[bytes]) -> Peeked | None:
            self.tube(tube)  # NotFoundError for a tube that does not exist
            c.use(tube)
            try:
                job = getattr(c, f"peek_{state}")()
            except WireNotFound:
                return None
            return Peeked(job.id, len(job.body), bytes(job.body[:BODY_SHOWN]))

        return self._with_client(work)

    def peek_job(self, id: int) -> Peeked:
        def work(c: Client[bytes]) -> Peeked:
            job = c.peek(id)
            return Peeked(job.id, len(job.body), bytes(job.body[:BODY_SHOWN]))

        return self._with_client(work)

    def kick(self, tube: str, bound: int) -> int:
        def work(c: Client[bytes]) -> int:
            self.tube(tube)
            c.use(tube)
            return c.kick(bound)

        return self._with_client(work)

    def kick_job(self, id: int) -> None:
        self._with_client(lambda c: c.kick_job(id))

    def delete(self, id: int) -> None:
        def work(c: Client[bytes]) -> None:
            state = self.job(id).get("state")
            if state == "reserved":
                raise ActionError(f"job {id} is reserved by a worker")
            c.delete(id)

        self._with_client(work)

    def pause(self, tube: str, seconds: int) -> None:
        self._with_client(lambda c: c.pause_tube(tube, seconds))

    def clear(self, tube: str, state: str, limit: int) -> int:
        """Peek the tube's next job of ``state`` and delete it, until none is left or
        ``limit`` are gone (the protocol has no bulk delete)."""
        from beanpole.client.blocking import NotFoundError as WireNotFound

        def work(c: Client[bytes]) -> int:
            self.tube(tube)
            c.use(tube)
            peek = getattr(c, f"peek_{state}")
            deleted = 0
            while deleted < limit:
                try:
                    job = peek()
                    c.delete(job.id)
                except WireNotFound:
                    # Nothing left, or a worker took the job between peek and delete:
                    # stop rather than spin.
                    break
                deleted += 1
            return deleted

        return self._with_client(work)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        with self._stats_lock:
            self._stats.close()
