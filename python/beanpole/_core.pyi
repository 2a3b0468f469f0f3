"""Type stubs for the native module built from rust/python."""

import os
from collections.abc import Callable, Iterable
from typing import Any, final

__all__ = [
    "EVENT_KINDS",
    "Admin",
    "ClusterNode",
    "EventStream",
    "NativeClient",
    "ServerHandle",
    "__version__",
    "bind_ahead",
    "binlog_compact",
    "binlog_dump",
    "binlog_import",
    "binlog_table_beanstalkd_jobs",
    "binlog_table_beanstalkd_plan",
    "binlog_table_jobs",
    "binlog_table_plan",
    "binlog_table_records",
    "binlog_verify",
    "cluster_change",
    "cluster_status",
    "shard_column",
]

__version__: str
EVENT_KINDS: list[str]

_StatValue = int | float | str | bool

@final
class ClusterNode:
    """A node of a replicated cluster (``beanpole serve --cluster FILE --node N -b DIR``)."""

    @staticmethod
    def start(
        cluster_file: str | os.PathLike[str],
        node: int,
        data_dir: str | os.PathLike[str],
        max_job_size: int = 65535,
        verbose: int = 0,
        threads: int = 0,
        max_connections: int = 0,
        max_memory: int = 0,
        heartbeat_ms: int = 50,
        election_timeout_ms: tuple[int, int] = ...,
        client_fd: int | None = None,
        peer_fd: int | None = None,
        announce: bool = True,
        commit_timeout_ms: int = 5000,
        admin_token: str | None = None,
        fsync: bool = True,
        session_grace_ms: int = 5000,
        log_cache_bytes: int = 16777216,
        snapshot_bytes: int = 67108864,
    ) -> ClusterNode: ...
    @property
    def node(self) -> int: ...
    @property
    def address(self) -> tuple[str, int]: ...
    def status(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, _StatValue] | None: ...
    def drain(self) -> None: ...
    def failure(self) -> str | None: ...
    def wait_serving(self, timeout: float) -> bool: ...
    def hand_over(self, timeout: float = 5.0) -> dict[str, Any]:
        """If this node leads, hand the lead to the most up-to-date other voter (for a
        planned stop; it serves no clients afterwards): ``outcome`` (``handed-over``,
        ``not-leader``, ``failed``), ``to``, ``term``, ``seconds``, ``message``."""

    def stop(self) -> None: ...

@final
class ServerHandle:
    """A running server: tokio runtime, listener and queue state, owned by Rust.

    Every blocking method releases the GIL while it waits.
    """

    @staticmethod
    def start(
        listen: list[str],
        port: int,
        max_job_size: int,
        verbose: int = 0,
        threads: int = 0,
        binlog_dir: str | os.PathLike[str] | None = None,
        fsync_ms: int | None = None,
        no_fsync: bool = False,
        segment_size: int = 10485760,
        skip_corrupt: bool = False,
        unix_mode: int | None = None,
        listen_fds: list[int] | None = None,
        tls_cert: str | os.PathLike[str] | None = None,
        tls_key: str | os.PathLike[str] | None = None,
        tls_client_ca: str | os.PathLike[str] | None = None,
        max_connections: int = 0,
        max_memory: int = 0,
    ) -> ServerHandle:
        """Bind the listeners and start serving; return once every socket is bound.

        Each ``listen`` entry is an IPv4 or IPv6 address (``[::1]`` too), with an
        optional port (``127.0.0.1:11301``, ``[::1]:11301``), or ``unix:/path``;
        ``port`` is the port of the entries without one, 0 picking a free port.
        ``unix_mode`` sets the permissions of the Unix sockets bound. ``listen_fds``
        are inherited listening sockets (socket activation), served before the
        ``listen`` entries; they are duplicated, so the caller still owns them. Raises
        ``OSError`` naming the address when one cannot be bound (nothing stays bound)
        and ``ValueError`` for an address or setting that makes no sense.

        With ``binlog_dir`` the server keeps a write-ahead log there (``-b``):
        ``fsync_ms`` None is the default (50 ms), 0 syncs before every reply, and
        ``no_fsync`` never syncs (``-F``); ``segment_size`` is ``-s``. An unusable
        directory (locked by another server, holding beanstalkd binlog files,
        corrupt) raises ``OSError``.

        ``tls_cert`` and ``tls_key`` (PEM files) serve the ``tls:`` entries of
        ``listen`` with TLS; with ``tls_client_ca`` only clients whose certificate
        that CA signed get in. Files that cannot be read or used raise ``OSError``.
        ``max_connections`` (0: no limit) closes connections beyond that many at once;
        ``max_memory`` (0: no limit) answers puts OUT_OF_MEMORY while the jobs take more
        than that many bytes (bodies plus a fixed overhead per job).
        """

    @property
    def address(self) -> tuple[str, int] | str:
        """The first address: ``(host, port)`` actually bound, or the socket path."""

    @property
    def addresses(self) -> list[tuple[str, int] | str]:
        """Every address listened on, in order, each as ``address`` gives it."""

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
    def reload_tls(self) -> bool:
        """Read the TLS files again for the connections accepted from now on; False
        without TLS. Raises ``OSError`` (keeping the certificates in force) when the
        files cannot be read or used."""

    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire (``version`` is the
        protocol's, ``1.13``), and ``beanpole-version`` (beanpole's own); with a log also
        ``log-failing`` (writes or fsyncs failing now) and ``log-errors`` (seen so far);
        with TLS also ``tls-failed-handshakes``; always ``connections-refused`` (by
        ``max_connections``) and ``job-bytes`` (what ``max_memory`` bounds)."""

@final
class EventStream:
    """The receiving end of a server's event queue."""

    def deliver(
        self,
        event_type: type[tuple[Any, ...]],
        hooks: dict[str, tuple[Callable[[Any], object], ...]],
        on_error: Callable[[Callable[[Any], object], Any, BaseException], object],
        on_message: Callable[[int, str], object],
        max: int = 1024,
        timeout: float | None = None,
    ) -> int | None:
        """Wait (without the GIL) up to ``timeout`` seconds for up to ``max`` events and
        call each one's hooks (``hooks[kind]``, in order) with an ``event_type`` named
        tuple (kind, job_id, tube, priority, at, detail); a hook raising an
        ``Exception`` goes to ``on_error(hook, event, exception)``, log lines to
        ``on_message(level, text)``. Returns the events taken (0 if none came in
        time), or None once the server stopped and all were taken."""

_TubeRow = tuple[str, int, int, int, int, int, int, int, int, int, int, int, int, int]

@final
class Admin:
    """The in-process admin calls of a running server. Each call releases the GIL while
    it holds the store lock; a missing tube or job raises ``KeyError``."""

    def __new__(cls, handle: ServerHandle) -> Admin:
        """The admin calls of ``handle``; ``RuntimeError`` if it is stopped."""

    def tube_stats(self, name: str) -> dict[str, _StatValue]: ...
    def job_stats(self, id: int) -> dict[str, _StatValue]: ...
    def tubes(self) -> list[str]: ...
    def pause(self, name: str, seconds: int) -> None: ...
    def kick(self, name: str, bound: int) -> int: ...
    def peek_job(self, id: int, max_bytes: int) -> tuple[int, int, bytes]:
        """``(id, body size, the body's first max_bytes bytes)``."""

    def peek(self, name: str, state: str, max_bytes: int) -> tuple[int, int, bytes] | None:
        """The next ``state`` (ready, delayed, buried) job of tube ``name``, as
        ``peek_job`` gives it, or None."""

    def kick_job(self, id: int) -> None: ...
    def delete(self, id: int) -> None: ...
    def clear(self, name: str, state: str, limit: int) -> int:
        """Delete up to ``limit`` of the tube's ``state`` jobs; how many were."""

    def snapshot(
        self, max_tubes: int | None = None
    ) -> tuple[dict[str, _StatValue], list[_TubeRow], _TubeRow | None]:
        """``stats`` (with ``beanpole-version``, and ``log-failing``/``log-errors`` when
        there is a log), every
        tube as a tuple in ``stats-tube`` order, and with ``max_tubes`` the tubes left
        out, summed (name ``_other``), or None."""

    @property
    def last_snapshot_lock_seconds(self) -> float:
        """How long the latest snapshot held the store lock."""

_Path = str | os.PathLike[str]

def bind_ahead(listen: list[str], port: int) -> list[int]:
    """Bind the TCP addresses ``listen`` as a server's start would; the listening
    sockets' descriptors, now the caller's (a server adopts them as ``listen_fds``).
    ValueError for a Unix or TLS address or one that does not parse; OSError when a
    bind fails."""

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
    classes of ``beanpole.client.errors``."""

    def __new__(
        cls,
        address: str,
        timeout: float | None = None,
        *,
        tls: bool = False,
        ca: str | None = None,
        cert: str | None = None,
        key: str | None = None,
        server_name: str | None = None,
    ) -> NativeClient:
        """With ``tls=True``, connect with TLS trusting the CA file ``ca`` (required),
        offering ``cert``/``key`` when given; ``server_name`` defaults to the host."""
    @staticmethod
    def from_fd(fd: int, address: str, timeout: float | None = None) -> NativeClient:
        """A client over ``fd``, a connected Unix stream socket (duplicated: the caller
        keeps and closes its own); ``address`` names the server in messages."""
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
    def put_many_columns(
        self,
        offsets: Any,
        data: Any,
        wide: bool,
        start: int,
        length: int,
        pri: int | tuple[Any, int],
        delay: int | tuple[Any, int],
        ttr: int | tuple[Any, int],
        tubes: tuple[Any, int, list[str]] | None,
        window: int,
    ) -> bytes:
        """Put the items of an Arrow binary/string array; each setting is one int or
        ``(buffer, offset)`` of a uint32 column, ``tubes`` is ``(int32 index buffer,
        offset, names)`` or None. The ids as packed little-endian uint64."""
    def stats_job_many(self, ids: list[int], window: int) -> list[tuple[bytes, int] | None]:
        """Pipelined stats-job: each job's tube and priority, None when not found."""
    def ttr_many(self, ids: list[int], window: int) -> list[int | None]:
        """Pipelined stats-job: each job's time to run in seconds, None when not found."""
    def touch_many(self, ids: list[int], window: int) -> list[bool]:
        """Pipelined touch: for each job, whether it was touched (False: not found, or
        not reserved by this connection)."""
    def reserve_job_many(self, ids: list[int], window: int) -> list[tuple[int, bytes] | None]:
        """Pipelined reserve-job: each job's id and body, None when not found."""
    def reserve_many(self, n: int, timeout: int, window: int) -> list[_Job]: ...
    def delete_many(self, ids: Iterable[object], window: int) -> list[int]: ...
    def release_many(
        self, ids: Iterable[object], pri: int, delay: int, window: int
    ) -> list[int]: ...
    def bury_many(self, ids: Iterable[object], pri: int, window: int) -> list[int]: ...
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

def binlog_table_beanstalkd_jobs(dir: _Path, files: list[str], now_ns: int) -> list[_Column]:
    """The live jobs whose latest full record is in the beanstalkd file ``file``."""

def shard_column(
    offsets: Any,
    data: Any,
    wide: bool,
    start: int,
    length: int,
    validity: Any | None,
    servers: list[str],
    first: int,
) -> bytes:
    """The server (an index into ``servers``) of each key of an Arrow binary/string
    array, by the rendezvous hashing of ``beanpole.client.sharded``, as packed little-endian
    uint32; a null key (per ``validity``) goes round robin from ``first``."""

def cluster_status(
    cluster_file: str | os.PathLike[str], timeout: float = 1.0
) -> list[dict[str, int | str | None]]: ...
def cluster_change(
    cluster_file: str | os.PathLike[str], op: str, node: int, token: str, timeout: float = 120.0
) -> str: ...
