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

    def reload_tls(self) -> bool:
        """Read the TLS files again for the connections accepted from now on; False
        without TLS. Raises ``OSError`` (keeping the certificates in force) when the
        files cannot be read or used."""

    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire; with a log also
        ``log-failing`` (writes or fsyncs failing now) and ``log-errors`` (seen so far);
        with TLS also ``tls-failed-handshakes``."""

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
