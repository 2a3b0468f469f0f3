"""A small client for the read-only side of the beanstalkd protocol: ``stats``,
``list-tubes``, ``stats-tube`` and ``stats-job``, against any beanstalkd-protocol server.

Many ``stats-tube`` commands go out pipelined, in windows of :data:`WINDOW` (two in
flight), so the stats of 10,000 tubes take a few round trips instead of 10,000. The YAML
bodies are parsed here: they are flat ``key: value`` lines (or ``- name`` lists), and
stock beanstalkd writes values such as ``os: #1 SMP`` that a YAML library would read as
a comment.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Final, Self, TypeAlias

from beanpole.addr import Address, describe, parse_server
from beanpole.client import snapshot

if TYPE_CHECKING:
    import ssl  # a context is given by the caller; plain connections never load ssl

__all__ = [
    "WINDOW",
    "NotFoundError",
    "StatValue",
    "Stats",
    "StatsClient",
    "StatsError",
    "parse_body",
]

StatValue: TypeAlias = int | float | str | bool
Stats: TypeAlias = dict[str, StatValue]

#: How many pipelined commands are in flight at once.
WINDOW: Final = 500
#: Keys whose values stay strings even when they look like numbers (a tube may be
#: named "123"; the server's hex ``id`` is kept as text by ``parse_body``).
_TEXT_KEYS: Final = frozenset({"hostname", "os", "platform", "version", "name", "tube", "state"})
_INT: Final = re.compile(r"-?[0-9]+\Z")
_FLOAT: Final = re.compile(r"-?[0-9]+\.[0-9]+\Z")
_RECV: Final = 256 * 1024
#: The largest stats body accepted (list-tubes of a million long names fits): a bigger
#: announced size is a broken or hostile server, not a reason to allocate.
MAX_BODY: Final = 256 * 1024 * 1024


class StatsError(Exception):
    """The server could not be reached or answered something unexpected."""


class NotFoundError(StatsError, snapshot.NotFoundError):
    """The tube or job asked about does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


def _value(key: str, raw: str) -> StatValue:
    if raw.isdigit() and raw.isascii() and key not in _TEXT_KEYS:  # the common case
        return int(raw)
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        return raw[1:-1]
    if key in _TEXT_KEYS:
        return raw
    if raw == "true":
        return True
    if raw == "false":
        return False
    if _INT.match(raw):
        return int(raw)
    if _FLOAT.match(raw):
        return float(raw)
    return raw


def parse_body(body: bytes, *, server: bool = False) -> Stats:
    """The ``key: value`` lines of a stats body, typed: ints, floats, bools, strings.

    ``server`` marks the body of ``stats``, whose ``id`` is a string of hex digits (in
    ``stats-job`` it is the job's number).
    """
    out: Stats = {}
    for line in body.decode("utf-8", "replace").split("\n"):
        if not line or line == "---":
            continue
        key, sep, raw = line.partition(": ")
        if not sep:
            key, raw = key.rstrip(":"), ""
        out[key] = raw if server and key == "id" else _value(key, raw)
    return out


def _parse_list(body: bytes) -> list[str]:
    text = body.decode("utf-8", "replace")
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


class StatsClient:
    """One connection to a beanstalkd-protocol server, for reading its stats.

    ``StatsClient("127.0.0.1:11300")`` (or ``unix:/path``, or a parsed address);
    connects on first use or ``with``. Errors raise :class:`StatsError` with a one-line
    message naming the server. With ``ssl_context`` the connection is TLS (TCP only);
    the server's certificate must name ``server_name``, by default the host.
    """

    def __init__(
        self,
        address: str | Address,
        *,
        timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
    ) -> None:
        if isinstance(address, str):
            try:
                address = parse_server(address)
            except ValueError as err:
                raise StatsError(f"bad server address: {err}") from None
        if ssl_context is not None and not isinstance(address, tuple):
            raise StatsError("TLS needs a host:port address, not a Unix socket")
        self.address: Address = address
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.server_name = server_name
        self._sock: socket.socket | None = None
        self._buf = bytearray()

    # -- connection ---------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def name(self) -> str:
        return describe(self.address)

    def connect(self) -> None:
        if self._sock is not None:
            return
        try:
            if isinstance(self.address, str):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(self.timeout)
                try:
                    sock.connect(self.address)
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection(self.address, timeout=self.timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.ssl_context is not None:
                    sock = self._wrap(sock, self.ssl_context)
        except OSError as err:
            raise StatsError(f"cannot connect to {self.name}: {_reason(err)}") from None
        self._sock = sock
        self._buf.clear()

    def _wrap(self, sock: socket.socket, ctx: ssl.SSLContext) -> socket.socket:
        """The TLS handshake, bounded by the socket's timeout."""
        assert isinstance(self.address, tuple)
        try:
            return ctx.wrap_socket(sock, server_hostname=self.server_name or self.address[0])
        except BaseException:
            sock.close()
            raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    # -- commands -----------------------------------------------------------------------

    def stats(self) -> Stats:
        """The server's ``stats``."""
        (reply,) = self._run([b"stats"])
        return parse_body(self._body(reply, "stats"), server=True)

    def list_tubes(self) -> list[str]:
        """The server's ``list-tubes``."""
        (reply,) = self._run([b"list-tubes"])
        return _parse_list(self._body(reply, "list-tubes"))

    def stats_tube(self, name: str) -> Stats:
        """``stats-tube NAME``; :class:`NotFoundError` if there is no such tube."""
        (found,) = self.stats_tubes([name])
        if found is None:
            raise NotFoundError(f"no tube named {name!r} on {self.name}")
        return found

    def stats_tubes(self, names: Sequence[str]) -> list[Stats | None]:
        """``stats-tube`` of each name, pipelined; None for a tube that does not exist
        (it may have gone away since it was listed)."""
        for name in names:
            if not name or any(c.isspace() for c in name):
                raise StatsError(f"invalid tube name {name!r}")
        lines = [b"stats-tube " + name.encode() for name in names]
        out: list[Stats | None] = []
        for reply in self._run(lines):
            out.append(None if reply is None else parse_body(self._body(reply, "stats-tube")))
        return out

    def stats_job(self, job_id: int) -> Stats:
        """``stats-job ID``; :class:`NotFoundError` if there is no such job."""
        (reply,) = self._run([f"stats-job {job_id}".encode()])
        if reply is None:
            raise NotFoundError(f"no job with id {job_id} on {self.name}")
        return parse_body(self._body(reply, "stats-job"))

    def snapshot(self) -> tuple[Stats, list[Stats]]:
        """``stats`` and every tube's ``stats-tube``: ``stats`` and ``list-tubes`` sent
        together, then the ``stats-tube`` windows (a tube gone meanwhile is left out)."""
        stats_body, list_body = self._run([b"stats", b"list-tubes"])
        server = parse_body(self._body(stats_body, "stats"), server=True)
        tubes = self.stats_tubes(_parse_list(self._body(list_body, "list-tubes")))
        return server, [t for t in tubes if t is not None]

    # -- wire ---------------------------------------------------------------------------

    def _body(self, reply: bytes | None, what: str) -> bytes:
        if reply is None:
            raise StatsError(f"{self.name} answered NOT_FOUND to {what}")
        return reply

    def _run(self, lines: Iterable[bytes]) -> list[bytes | None]:
        """Send ``lines`` in windows of :data:`WINDOW`; each reply's body, or None for
        NOT_FOUND."""
        self.connect()
        sock = self._sock
        assert sock is not None
        pending = list(lines)
        windows = [pending[start : start + WINDOW] for start in range(0, len(pending), WINDOW)]
        replies: list[bytes | None] = []
        try:
            # Two windows in flight: the server answers the next one while this side
            # reads the replies to the current one.
            for i, window in enumerate(windows):
                if i == 0:
                    sock.sendall(b"".join(line + b"\r\n" for line in window))
                if i + 1 < len(windows):
                    sock.sendall(b"".join(line + b"\r\n" for line in windows[i + 1]))
                for line in window:
                    replies.append(self._reply(sock, line))
        except OSError as err:
            self.close()
            raise StatsError(f"lost the connection to {self.name}: {_reason(err)}") from None
        except StatsError:
            self.close()
            raise
        return replies

    def _reply(self, sock: socket.socket, sent: bytes) -> bytes | None:
        header = self._line(sock)
        if header.startswith(b"OK "):
            size = header[3:]
            if not size.isdigit() or int(size) > MAX_BODY:
                raise StatsError(f"{self.name} sent a malformed reply: {header[:60]!r}")
            body = self._exact(sock, int(size) + 2)
            return body[:-2]
        if header == b"NOT_FOUND":
            return None
        command = sent.split(b" ", 1)[0].decode()
        word = header[:60].decode("ascii", "replace")
        raise StatsError(f"{self.name} answered {word} to {command}")

    def _fill(self, sock: socket.socket) -> None:
        chunk = sock.recv(_RECV)
        if not chunk:
            raise StatsError(f"{self.name} closed the connection")
        self._buf += chunk

    def _line(self, sock: socket.socket) -> bytes:
        while True:
            end = self._buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 2]
                return line
            if len(self._buf) > 1024:
                raise StatsError(f"{self.name} sent an over-long reply line")
            self._fill(sock)

    def _exact(self, sock: socket.socket, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill(sock)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data


def _reason(err: OSError) -> str:
    if isinstance(err, TimeoutError):
        return "timed out"
    return err.strerror or str(err) or type(err).__name__
