"""Type stubs for the native module built from rust/python."""

import os
from typing import Any, final

__all__ = [
    "EVENT_KINDS",
    "EventStream",
    "ServerHandle",
    "__version__",
    "binlog_compact",
    "binlog_dump",
    "binlog_import",
    "binlog_table_beanstalkd_jobs",
    "binlog_table_beanstalkd_plan",
    "binlog_table_jobs",
    "binlog_table_plan",
    "binlog_table_records",
    "binlog_verify",
]

__version__: str
EVENT_KINDS: list[str]

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

    def begin_stop(self) -> None:
        """Begin stopping at once (stop accepting, tell connections to finish)."""

    def wait_signal(
        self,
        fd: int,
        timeout: float | None = None,
        stop_signals: list[int] = ...,
        drain_signals: list[int] = ...,
    ) -> tuple[bool, list[int]]:
        """Block (without the GIL) until ``fd`` is readable, the server has finished or
        ``timeout`` passes; act on the signal numbers read from ``fd`` (drain, or begin
        the stop) and return (finished, signal numbers)."""

    def subscribe_events(self, capacity: int) -> EventStream:
        """Start the event queue of ``capacity`` events and return its receiving end."""

    def set_event_kinds(self, kinds: list[str]) -> None:
        """Produce events of exactly these kinds from now on (ValueError if unknown)."""

    def set_log_messages(self, on: bool) -> None:
        """Send the engine's log lines through the event queue instead of stderr."""

    @property
    def events_dropped(self) -> int: ...
    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire; with a log also
        ``log-failing`` (writes or fsyncs failing now) and ``log-errors`` (seen so far)."""


_EventTuple = tuple[str, int | None, str | None, int | None, float, str | None]

@final
class EventStream:
    """The receiving end of a server's event queue."""

    def next_batch(
        self, max: int = 1024, timeout: float | None = None
    ) -> list[_EventTuple] | None:
        """Up to ``max`` events as (kind, job_id, tube, priority, at, detail); an empty
        list if none came within ``timeout``; None once the server stopped and all were
        taken."""

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

# A column as Arrow buffers: name, type ("int64", "string", "binary"), rows, nulls,
# validity bitmap (None: no nulls), offsets (strings and binaries), values.
_Column = tuple[str, str, int, int, bytes | None, bytes | None, bytes]

def binlog_table_plan(dir: _Path) -> tuple[list[tuple[int, int, bytes]], list[str]]:
    """Plan a table read of a log: (segment, end of its readable records, records of
    later segments about its jobs) for each segment holding records, and warnings."""

def binlog_table_jobs(
    dir: _Path, seq: int, end: int, later: bytes, now_ns: int
) -> list[_Column]:
    """The live jobs homed in one planned segment, as a restart at ``now_ns`` sees them."""

def binlog_table_records(dir: _Path, seq: int, end: int) -> list[_Column]:
    """Every record of one planned segment."""

def binlog_table_beanstalkd_plan(dir: _Path) -> tuple[list[str], list[str]]:
    """The beanstalkd ``binlog.N`` files holding live jobs, and the reader's warnings."""

def binlog_table_beanstalkd_jobs(dir: _Path, file: str, now_ns: int) -> list[_Column]:
    """The live jobs whose latest full record is in the beanstalkd file ``file``."""
