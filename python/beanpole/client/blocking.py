"""``beanpole.Client``: a beanstalkd client whose protocol work is done in Rust.

The methods have greenstalk's names and meanings, so switching is an import change::

    with beanpole.Client(("127.0.0.1", 11300)) as c:
        c.put("hello")
        job = c.reserve(timeout=5)
        c.delete(job)

On top of that come pipelined batches (``put_many``, ``reserve_many``, ``delete_many``,
``release_many``, ``bury_many``) that keep up to ``window`` commands in flight. Every call
releases the GIL while it waits on the network. Errors are the classes of
:mod:`beanpole.client.errors`, re-exported here. It works with stock beanstalkd too.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from beanpole.client.errors import (
    BadFormatError,
    BatchError,
    BeanstalkdError,
    BuriedError,
    ClientConnectionError,
    ClientError,
    ConnectFailedError,
    ConnectionLostError,
    ConnectionTimeoutError,
    DeadlineSoonError,
    DrainingError,
    ExpectedCrlfError,
    InternalError,
    JobTooBigError,
    NotConnectedError,
    NotFoundError,
    NotIgnoredError,
    OutOfMemoryError,
    ServerDownError,
    TimedOutError,
    TLSConfigError,
    TLSError,
    UnknownCommandError,
    UnknownResponseError,
)
from beanpole.client.tls import ContextTLS, PathArg, TLSOptions, client_tls

if TYPE_CHECKING:
    from beanpole._core import NativeClient
    from beanpole.client.relay import Relay

__all__ = [
    "DEFAULT_DELAY",
    "DEFAULT_PRIORITY",
    "DEFAULT_TTR",
    "DEFAULT_TUBE",
    "DEFAULT_WINDOW",
    "BadFormatError",
    "BatchError",
    "BeanstalkdError",
    "BuriedError",
    "Client",
    "ClientConnectionError",
    "ClientError",
    "ConnectFailedError",
    "ConnectionLostError",
    "ConnectionTimeoutError",
    "DeadlineSoonError",
    "DrainingError",
    "ExpectedCrlfError",
    "InternalError",
    "Job",
    "JobTooBigError",
    "NotConnectedError",
    "NotFoundError",
    "NotIgnoredError",
    "OutOfMemoryError",
    "ServerDownError",
    "TLSConfigError",
    "TLSError",
    "TimedOutError",
    "UnknownCommandError",
    "UnknownResponseError",
    "format_address",
]

DEFAULT_TUBE = "default"
DEFAULT_PRIORITY = 2**16
DEFAULT_DELAY = 0
DEFAULT_TTR = 60
#: Commands a batch keeps in flight unless told otherwise.
DEFAULT_WINDOW = 1000

TBody = TypeVar("TBody", str, bytes)
Address = tuple[str, int] | str
#: A scalar for every job, or one value per job.
PerJob = int | Iterable[int]


class Job(Generic[TBody]):
    """A job: its id and body, and for a ``ShardedClient`` the server it lives on."""

    __slots__ = ("body", "id", "server")

    def __init__(self, id: int, body: TBody, server: str | None = None) -> None:
        self.id = id
        self.body: TBody = body
        self.server = server

    def __repr__(self) -> str:
        where = f", server={self.server!r}" if self.server is not None else ""
        return f"beanpole.Job(id={self.id!r}, body={self.body!r}{where})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job):
            return NotImplemented
        return (self.id, self.body, self.server) == (other.id, other.body, other.server)

    def __hash__(self) -> int:
        return hash((self.id, self.server))


JobOrId = Job[Any] | int


def format_address(address: Address) -> str:
    """``(host, port)``, ``"host:port"``, ``"unix:/path"`` or a bare socket path, as the
    one string form the native client takes."""
    if isinstance(address, tuple):
        host, port = address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if address.startswith("/"):
        return f"unix:{address}"
    return address


def _id(job: JobOrId) -> int:
    return job.id if isinstance(job, Job) else job


def parse_yaml(body: bytes) -> dict[str, Any]:
    """A stats body: ints where the value is a number, strings otherwise."""
    out: dict[str, Any] = {}
    for line in body.decode("utf-8", "replace").splitlines()[1:]:
        key, sep, value = line.partition(": ")
        if not sep:
            continue
        try:
            out[key] = int(value)
        except ValueError:
            out[key] = value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value
    return out


def parse_list(body: bytes) -> list[str]:
    """A list-tubes body."""
    return [
        line[2:]
        for line in body.decode("utf-8", "replace").splitlines()[1:]
        if line.startswith("- ")
    ]


def _native(
    address: Address, timeout: float | None, tls: TLSOptions | ContextTLS | None
) -> tuple[NativeClient, Relay | None]:
    """The native client, and the relay thread it talks through for an SSLContext."""
    from beanpole._core import NativeClient

    if tls is None:
        return NativeClient(format_address(address), timeout), None
    if isinstance(tls, ContextTLS):
        from beanpole.client.relay import open_relayed

        return open_relayed(format_address(address), tls, timeout)
    native = NativeClient(
        format_address(address),
        timeout,
        tls=True,
        ca=tls.ca,
        cert=tls.cert,
        key=tls.key,
        server_name=tls.server_name,
    )
    return native, None


def _is_arrow(obj: object) -> bool:
    return type(obj).__module__.startswith("pyarrow")


class Client(Generic[TBody]):
    """One connection to a beanstalkd-protocol server.

    ``address`` is ``(host, port)``, ``"host:port"`` or ``"unix:/path"``. Bodies are
    ``str`` encoded with ``encoding``, or ``bytes`` when ``encoding`` is None.
    ``use`` and ``watch`` set the tubes at connect time. ``timeout`` (seconds) bounds
    connecting and every wait for a reply; a reserve waits its own timeout on top.
    One call at a time runs on the connection; threads may share a client.

    ``tls=True`` connects with TLS, trusting the CA certificates (PEM) in the file
    ``ca`` (default: the system's bundle); ``cert`` and ``key`` (PEM files) are this
    client's certificate for servers that require one; ``server_name`` is the name the
    server's certificate must carry (default: the host connected to, DNS name or IP
    address). The handshake is bounded by ``timeout`` (10 s without one). Bad files
    raise ``TLSConfigError``; a failed handshake or a refused client certificate
    ``TLSError``.

    ``tls`` may instead be an ``ssl.SSLContext``, used as it is (its CAs, client
    certificate, verification and hostname check; ``server_name`` still picks the name,
    and ``ca``/``cert``/``key`` are a ``ValueError``). Python's ``ssl`` does that TLS
    and a relay thread copies the bytes to the native client, which is slower than
    ``tls=True``. A client certificate the server refuses after the handshake shows
    as ``ConnectionLostError`` on the first command.
    """

    @overload
    def __init__(
        self: Client[str],
        address: Address,
        *,
        encoding: str = "utf-8",
        use: str = DEFAULT_TUBE,
        watch: str | Iterable[str] = DEFAULT_TUBE,
        timeout: float | None = None,
        tls: bool | ssl.SSLContext = False,
        ca: PathArg | None = None,
        cert: PathArg | None = None,
        key: PathArg | None = None,
        server_name: str | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self: Client[bytes],
        address: Address,
        *,
        encoding: None,
        use: str = DEFAULT_TUBE,
        watch: str | Iterable[str] = DEFAULT_TUBE,
        timeout: float | None = None,
        tls: bool | ssl.SSLContext = False,
        ca: PathArg | None = None,
        cert: PathArg | None = None,
        key: PathArg | None = None,
        server_name: str | None = None,
    ) -> None: ...

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
        options = client_tls(tls, ca, cert, key, server_name)
        self.encoding = encoding
        self.address = format_address(address)
        self._utf8 = encoding is not None and encoding.replace("_", "-").lower() in (
            "utf-8",
            "utf8",
        )
        self._native, self._relay = _native(address, timeout, options)
        try:
            if use != DEFAULT_TUBE:
                self.use(use)
            tubes = [watch] if isinstance(watch, str) else list(watch)
            for tube in tubes:
                if tube != DEFAULT_TUBE:
                    self.watch(tube)
            if DEFAULT_TUBE not in tubes:
                self.ignore(DEFAULT_TUBE)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Client[TBody]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"beanpole.Client({self.address!r})"

    @property
    def connected(self) -> bool:
        """False once closed, or after the connection failed."""
        return self._native.connected

    def close(self) -> None:
        """Close the connection; the server releases any job it still has reserved."""
        self._native.close()
        if self._relay is not None:
            self._relay.close()

    def interrupt(self) -> None:
        """From another thread: make a blocked call (a reserve) fail at once with a
        ``ClientConnectionError``; the connection is closed."""
        self._native.interrupt()

    # -- bodies ----------------------------------------------------------------

    def _encode(self, body: str | bytes) -> bytes:
        if isinstance(body, str):
            if self.encoding is None:
                raise TypeError("cannot send a str body with encoding=None")
            return body.encode(self.encoding)
        return body

    def _job(self, pair: tuple[int, bytes]) -> Job[TBody]:
        job_id, raw = pair
        body: Any = raw if self.encoding is None else raw.decode(self.encoding)
        return Job(job_id, body)

    # -- producing -------------------------------------------------------------

    def put(
        self,
        body: TBody,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        ttr: int = DEFAULT_TTR,
    ) -> int:
        """Insert a job into the used tube; its id."""
        return self._native.put(self._encode(body), priority, delay, ttr)

    def use(self, tube: str) -> None:
        self._native.use(tube)

    def using(self) -> str:
        return self._native.using().decode("utf-8", "replace")

    # -- consuming -------------------------------------------------------------

    def reserve(self, timeout: int | None = None) -> Job[TBody]:
        """Reserve a job from the watched tubes, waiting ``timeout`` seconds (None: for
        ever). Raises ``TimedOutError`` or ``DeadlineSoonError``."""
        return self._job(self._native.reserve(timeout))

    def reserve_job(self, id: int) -> Job[TBody]:
        return self._job(self._native.reserve_job(id))

    def delete(self, job: JobOrId) -> None:
        self._native.delete(_id(job))

    def release(
        self, job: JobOrId, priority: int = DEFAULT_PRIORITY, delay: int = DEFAULT_DELAY
    ) -> None:
        self._native.release(_id(job), priority, delay)

    def bury(self, job: JobOrId, priority: int = DEFAULT_PRIORITY) -> None:
        self._native.bury(_id(job), priority)

    def touch(self, job: JobOrId) -> None:
        self._native.touch(_id(job))

    def watch(self, tube: str) -> int:
        """Add a tube to the watch list; the number of tubes watched."""
        return self._native.watch(tube)

    def ignore(self, tube: str) -> int:
        return self._native.ignore(tube)

    def watching(self) -> list[str]:
        return parse_list(self._native.yaml("watching"))

    # -- other commands --------------------------------------------------------

    def peek(self, id: int) -> Job[TBody]:
        return self._job(self._native.peek(id))

    def peek_ready(self) -> Job[TBody]:
        return self._job(self._native.peek("ready"))

    def peek_delayed(self) -> Job[TBody]:
        return self._job(self._native.peek("delayed"))

    def peek_buried(self) -> Job[TBody]:
        return self._job(self._native.peek("buried"))

    def kick(self, bound: int) -> int:
        """Kick up to ``bound`` buried (else delayed) jobs of the used tube; how many."""
        return self._native.kick(bound)

    def kick_job(self, job: JobOrId) -> None:
        self._native.kick_job(_id(job))

    def tubes(self) -> list[str]:
        return parse_list(self._native.yaml("tubes"))

    def stats(self) -> dict[str, Any]:
        return parse_yaml(self._native.yaml("stats"))

    def stats_tube(self, tube: str) -> dict[str, Any]:
        return parse_yaml(self._native.yaml("tube", tube))

    def stats_job(self, job: JobOrId) -> dict[str, Any]:
        return parse_yaml(self._native.yaml("job", _id(job)))

    def pause_tube(self, tube: str, delay: int) -> None:
        self._native.pause_tube(tube, delay)

    # -- batches ---------------------------------------------------------------

    def put_many(
        self,
        bodies: Iterable[TBody] | Any,
        *,
        priority: PerJob = DEFAULT_PRIORITY,
        delay: PerJob = DEFAULT_DELAY,
        ttr: PerJob = DEFAULT_TTR,
        tube: str | None = None,
        window: int = DEFAULT_WINDOW,
    ) -> list[int]:
        """Put every body, pipelined ``window`` commands at a time; the ids in order.

        ``bodies`` is any iterable (consumed lazily, so a generator of any length runs
        in bounded memory) or a pyarrow binary/string array (read from its buffers
        without a Python object per job). ``priority``, ``delay`` and ``ttr`` are one
        value for all or an iterable with one per job. ``tube`` puts into that tube
        and then goes back to the tube in use. A refused item raises ``BatchError``.
        """
        previous = None
        if tube is not None:
            previous = self.using()
            self.use(tube)
        try:
            if _is_arrow(bodies):
                from beanpole.client.arrow import put_arrow

                return put_arrow(self._native, bodies, priority, delay, ttr, window)
            if self.encoding is not None and not self._utf8:
                # The native side encodes only UTF-8; other encodings are done here.
                enc = self.encoding
                bodies = (b.encode(enc) if isinstance(b, str) else b for b in bodies)
            return self._native.put_many(bodies, priority, delay, ttr, window, self._utf8)
        finally:
            if previous is not None and self.connected:
                self.use(previous)

    def put_arrow(
        self,
        bodies: Any,
        *,
        priority: int | Any = DEFAULT_PRIORITY,
        delay: int | Any = DEFAULT_DELAY,
        ttr: int | Any = DEFAULT_TTR,
        tube: Any = None,
        window: int = DEFAULT_WINDOW,
    ) -> Any:
        """Put every item of a pyarrow binary or string Array, pipelined; the ids, in
        order, as a ``pyarrow.UInt64Array``.

        ``priority``, ``delay`` and ``ttr`` are one int for all, or a ``uint32`` array
        with one value per body (no nulls). ``tube`` is None (the tube in use) or a
        string array (plain or dictionary-encoded) naming each job's tube: a ``use``
        is sent whenever it changes, and the tube in use afterwards is the last row's.
        Nothing is read through a Python object per job. A refused item raises
        ``BatchError`` as ``put_many`` does.
        """
        import pyarrow as pa

        from beanpole.client.arrow import put_columns

        if hasattr(bodies, "combine_chunks"):
            bodies = bodies.combine_chunks()
        packed = put_columns(self._native, bodies, priority, delay, ttr, tube, window)
        return pa.Array.from_buffers(pa.uint64(), len(packed) // 8, [None, pa.py_buffer(packed)])

    def reserve_many(
        self, n: int, timeout: int = 0, *, window: int = DEFAULT_WINDOW
    ) -> list[Job[TBody]]:
        """Reserve up to ``n`` jobs with pipelined ``reserve-with-timeout``: the first
        waits up to ``timeout`` seconds, the others take what is ready. Stops at the
        first TIMED_OUT (or DEADLINE_SOON); fewer than ``n`` jobs is not an error."""
        pairs = self._native.reserve_many(n, timeout, window)
        return [self._job(p) for p in pairs]

    def reserve_job_many(
        self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW
    ) -> list[Job[TBody] | None]:
        """Reserve every named job (pipelined ``reserve-job``), in order; None for a job
        that is not found (deleted, or reserved by another connection)."""
        pairs = self._native.reserve_job_many([_id(j) for j in ids], window)
        return [None if p is None else self._job(p) for p in pairs]

    def stats_job_many(
        self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW
    ) -> list[tuple[str, int] | None]:
        """The tube and priority of every job (pipelined stats-job); None for a job
        that is not found."""
        out: list[tuple[str, int] | None] = []
        for item in self._native.stats_job_many([_id(j) for j in ids], window):
            out.append(None if item is None else (item[0].decode("utf-8", "replace"), item[1]))
        return out

    def ttr_many(
        self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW
    ) -> list[int | None]:
        """The time to run, in seconds, of every job (pipelined stats-job); None for a
        job that is not found."""
        return self._native.ttr_many([_id(j) for j in ids], window)

    def touch_many(self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW) -> list[bool]:
        """Touch every job (pipelined); for each, whether it was touched (False: not
        found, or not reserved by this connection)."""
        return self._native.touch_many([_id(j) for j in ids], window)

    def delete_many(self, ids: Iterable[JobOrId], *, window: int = DEFAULT_WINDOW) -> None:
        """Delete every job (ids or Jobs), pipelined."""
        self._native.delete_many(ids, window)

    def release_many(
        self,
        ids: Iterable[JobOrId],
        *,
        priority: int = DEFAULT_PRIORITY,
        delay: int = DEFAULT_DELAY,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        """Release every reserved job, pipelined."""
        self._native.release_many(ids, priority, delay, window)

    def bury_many(
        self,
        ids: Iterable[JobOrId],
        *,
        priority: int = DEFAULT_PRIORITY,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        """Bury every reserved job, pipelined."""
        self._native.bury_many(ids, priority, window)
