"""Type stubs for the native module built from rust/python."""

import os
from typing import Any, final

__all__ = [
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
        max_connections: int = 0,
        max_memory: int = 0,
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

        ``max_connections`` (0: no limit) closes connections beyond that many at once;
        ``max_memory`` (0: no limit) answers puts OUT_OF_MEMORY while the jobs take more
        than that many bytes (bodies plus a fixed overhead per job).
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
        ``log-failing`` (writes or fsyncs failing now) and ``log-errors`` (seen so far);
        always ``connections-refused`` (by ``max_connections``) and ``job-bytes`` (what
        ``max_memory`` bounds)."""

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
