"""Type stubs for the native module built from rust/python."""

import os
from collections.abc import Iterable
from typing import Any, final

__all__ = [
    "NativeClient",
    "ServerHandle",
    "__version__",
    "binlog_compact",
    "binlog_dump",
    "binlog_import",
    "binlog_verify",
]

__version__: str

_StatValue = int | float | str | bool

@final
class ServerHandle:
    """A running server: tokio runtime, listener and queue state, owned by Rust.

    Every blocking method releases the GIL while it waits.
    """

    @staticmethod
    def start(
        listen: str,
        port: int,
        max_job_size: int,
        verbose: int = 0,
        threads: int = 0,
        binlog_dir: str | os.PathLike[str] | None = None,
        fsync_ms: int | None = None,
        no_fsync: bool = False,
        segment_size: int = 10485760,
        skip_corrupt: bool = False,
    ) -> ServerHandle:
        """Bind the listener and start serving; return once the socket is bound.

        ``listen`` is an IPv4 or IPv6 address or ``unix:/path``. ``port`` 0 picks a
        free port. Raises ``OSError`` when the address cannot be bound and
        ``ValueError`` for an address or setting that makes no sense.

        With ``binlog_dir`` the server keeps a write-ahead log there (``-b``):
        ``fsync_ms`` None is the default (50 ms), 0 syncs before every reply, and
        ``no_fsync`` never syncs (``-F``); ``segment_size`` is ``-s``. An unusable
        directory (locked by another server, holding beanstalkd binlog files,
        corrupt) raises ``OSError``.
        """

    @property
    def address(self) -> tuple[str, int] | str:
        """``(host, port)`` actually bound, or the socket path for ``unix:``."""

    @property
    def running(self) -> bool: ...
    @property
    def draining(self) -> bool: ...
    def drain(self) -> None:
        """Enter drain mode: puts are answered DRAINING from now on."""

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close connections and wait up to ``timeout`` seconds."""

    def wait(self, timeout: float | None = None) -> bool:
        """Block (without the GIL) until the server stops; True if it has stopped."""

    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire; with a log also
        ``log-failing`` (writes or fsyncs failing now) and ``log-errors`` (seen so far)."""

_Path = str | os.PathLike[str]

def binlog_dump(dir: _Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every record of the log in ``dir`` (dicts with segment, offset, kind, id and the
    record's fields), and the problems that stopped reading."""

def binlog_verify(dir: _Path) -> dict[str, Any]:
    """Replay without changing anything: segments, records, jobs, next_id, warnings.
    Raises ``OSError`` where a server would refuse to start."""

def binlog_compact(dir: _Path, segment_size: int = 10485760) -> tuple[int, int]:
    """Rewrite live jobs into fresh segments: (jobs kept, segments removed)."""

def binlog_import(src: _Path, dst: _Path, segment_size: int = 10485760) -> tuple[int, list[str]]:
    """Convert a beanstalkd binlog directory: (jobs written, warnings)."""

_Job = tuple[int, bytes]

@final
class NativeClient:
    """One blocking connection to a beanstalkd-protocol server (used by
    ``beanpole.Client``). Every call releases the GIL while it waits; errors are the
    classes of ``beanpole.client_errors``."""

    def __new__(cls, address: str, timeout: float | None = None) -> NativeClient: ...
    @property
    def address(self) -> str: ...
    @property
    def connected(self) -> bool: ...
    def interrupt(self) -> None: ...
    def close(self) -> None: ...
    def put(self, body: bytes, pri: int, delay: int, ttr: int) -> int: ...
    def reserve(self, timeout: int | None = None) -> _Job: ...
    def reserve_job(self, id: int) -> _Job: ...
    def delete(self, id: int) -> None: ...
    def release(self, id: int, pri: int, delay: int) -> None: ...
    def bury(self, id: int, pri: int) -> None: ...
    def touch(self, id: int) -> None: ...
    def kick(self, bound: int) -> int: ...
    def kick_job(self, id: int) -> None: ...
    def peek(self, which: int | str) -> _Job: ...
    def use(self, tube: str) -> bytes: ...
    def watch(self, tube: str) -> int: ...
    def ignore(self, tube: str) -> int: ...
    def using(self) -> bytes: ...
    def yaml(self, what: str, arg: int | str | None = None) -> bytes: ...
    def pause_tube(self, tube: str, delay: int) -> None: ...
    def put_many(
        self,
        bodies: Iterable[object],
        pri: int | Iterable[int],
        delay: int | Iterable[int],
        ttr: int | Iterable[int],
        window: int,
        utf8: bool = True,
    ) -> list[int]: ...
    def put_many_arrow(
        self,
        offsets: Any,
        data: Any,
        wide: bool,
        start: int,
        length: int,
        pri: int | Iterable[int],
        delay: int | Iterable[int],
        ttr: int | Iterable[int],
        window: int,
    ) -> list[int]: ...
    def reserve_many(self, n: int, timeout: int, window: int) -> list[_Job]: ...
    def delete_many(self, ids: Iterable[object], window: int) -> list[int]: ...
    def release_many(
        self, ids: Iterable[object], pri: int, delay: int, window: int
    ) -> list[int]: ...
    def bury_many(self, ids: Iterable[object], pri: int, window: int) -> list[int]: ...
