"""An embeddable beanpole server: start, stop, drain and signal handling.

The queue itself runs in Rust (``beanpole._core.ServerHandle``) on its own threads; this
module adds the lifecycle rules, dropping privileges after the socket is bound, and the
signal handling of :meth:`Server.serve_forever`::

    with Server(port=0) as srv:
        host, port = srv.address
        ...
"""

from __future__ import annotations

import os
import pwd
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeAlias, Unpack

from beanpole.config import Config, ConfigChanges

if TYPE_CHECKING:
    from beanpole._core import ServerHandle, _StatValue

__all__ = ["Server", "ServerError"]

#: How long a wait blocks in native code before Python gets a chance to run signal handlers.
_WAIT_SLICE: Final = 0.25
_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
_DRAIN_SIGNAL: Final = signal.SIGUSR1
_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class ServerError(RuntimeError):
    """A server was used in a way its state does not allow, or could not switch user."""


class Server:
    """One beanpole server, running in this process on threads of its own.

    ``Server(config, **overrides)`` takes a :class:`~beanpole.Config` (default: the
    defaults) with any fields replaced by keyword arguments, e.g. ``Server(port=0)``. Nothing
    happens until :meth:`start` (or ``with``); a server starts at most once, and once
    stopped it stays stopped.
    """

    def __init__(self, config: Config | None = None, **overrides: Unpack[ConfigChanges]) -> None:
        base = Config() if config is None else config
        self._config = base.replace(**overrides) if overrides else base
        self._lock = threading.Lock()
        self._handle: ServerHandle | None = None
        self._address: tuple[str, int] | str | None = None
        self._stopping = False

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> Self:
        """Bind the socket and start serving; return once clients can connect.

        Raises :class:`OSError` if the address cannot be bound (e.g. the port is in use)
        or the write-ahead log directory cannot be used (held by another server, holding
        beanstalkd binlog files, corrupt), and :class:`ServerError` if the server was
        already started, or if ``user`` is set and the process cannot become that user
        (the server is then stopped again).
        """
        with self._lock:
            if self._stopping:
                raise ServerError(
                    "this server has been stopped; create a new Server to serve again"
                )
            if self._handle is not None:
                raise ServerError(f"this server is already running on {self._describe()}")
            cfg = self._config
            account = _lookup_user(cfg.user) if cfg.user is not None else None
            if account is not None and cfg.binlog_dir is not None:
                _check_log_dir_for(account, cfg.binlog_dir)
            handle = _start_native(cfg)
            if account is not None:
                try:
                    _become(account)
                except OSError as err:
                    handle.stop()
                    self._stopping = True
                    reason = err.strerror or str(err)
                    hint = " (only root can switch user)" if os.geteuid() != 0 else ""
                    raise ServerError(
                        f"cannot become user {account.pw_name!r}: {reason}{hint}"
                    ) from None
            self._handle = handle
            self._address = handle.address
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close connections and wait up to ``timeout`` seconds for it.

        Safe to call more than once, from any thread; does nothing on a server that was
        never started.
        """
        with self._lock:
            handle = self._handle
            if handle is None:
                return
            first = not self._stopping
            self._stopping = True
        if first:
            handle.stop(timeout)
        else:
            self._wait(handle, timeout)

    def drain(self) -> None:
        """Enter drain mode: from now on every ``put`` is answered ``DRAINING``."""
        self._running_handle().drain()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops, at most ``timeout`` seconds; True if it stopped."""
        return self._wait(self._started_handle(), timeout)

    def serve_forever(
        self,
        *,
        on_ready: Callable[[Server], None] | None = None,
        on_signal: Callable[[signal.Signals], None] | None = None,
    ) -> None:
        """Serve until the server is stopped; start it first if needed.

        In the main thread, SIGINT and SIGTERM stop the server cleanly and SIGUSR1 puts it
        in drain mode. The handlers are installed before the server starts and the previous
        ones are restored on return. In another thread no handlers are installed and this
        returns once someone calls :meth:`stop`.

        ``on_ready(server)`` is called once the server is listening and the handlers are in
        place (so a signal sent from then on is acted on); ``on_signal(sig)`` is called for
        each of these signals after it has been acted on. The server is stopped when this
        returns, whatever the reason.
        """
        stop_requested = threading.Event()
        drain_requested = threading.Event()

        def on_stop_signal(signum: int, frame: FrameType | None) -> None:
            stop_requested.set()
            if on_signal is not None:
                on_signal(signal.Signals(signum))

        def on_drain_signal(signum: int, frame: FrameType | None) -> None:
            drain_requested.set()
            handle = self._handle
            if handle is not None and not stop_requested.is_set():
                handle.drain()
            if on_signal is not None:
                on_signal(signal.Signals(signum))

        previous: dict[signal.Signals, _SignalHandler] = {}
        try:
            if threading.current_thread() is threading.main_thread():
                for sig in _STOP_SIGNALS:
                    previous[sig] = signal.signal(sig, on_stop_signal)
                previous[_DRAIN_SIGNAL] = signal.signal(_DRAIN_SIGNAL, on_drain_signal)
            if self._handle is None:
                self.start()
            handle = self._running_handle()
            if drain_requested.is_set():  # SIGUSR1 arrived while the server was starting
                handle.drain()
            if on_ready is not None:
                on_ready(self)
            while not stop_requested.is_set() and not handle.wait(_WAIT_SLICE):
                pass
        finally:
            try:
                self.stop()
            finally:
                for sig, old in previous.items():
                    signal.signal(sig, signal.SIG_DFL if old is None else old)

    def __enter__(self) -> Self:
        if self._handle is None:
            self.start()
        else:
            self._running_handle()  # entering a stopped server is an error
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- state --------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The settings this server was created with."""
        return self._config

    @property
    def address(self) -> tuple[str, int] | str:
        """``(host, port)`` actually bound (the real port when 0 was asked), or the unix
        socket path. Still available after :meth:`stop`."""
        if self._address is None:
            raise ServerError("this server has not been started")
        return self._address

    @property
    def host(self) -> str:
        """The IP address the server listens on."""
        address = self.address
        if isinstance(address, str):
            raise ServerError(f"this server listens on a unix socket ({address}); it has no host")
        return address[0]

    @property
    def port(self) -> int:
        """The TCP port the server listens on (the real one when port 0 was asked)."""
        address = self.address
        if isinstance(address, str):
            raise ServerError(f"this server listens on a unix socket ({address}); it has no port")
        return address[1]

    @property
    def running(self) -> bool:
        """True from :meth:`start` until the server has stopped."""
        handle = self._handle
        return handle is not None and not self._stopping and handle.running

    @property
    def draining(self) -> bool:
        """True once the server is in drain mode."""
        handle = self._handle
        return handle is not None and handle.draining

    def stats(self) -> dict[str, _StatValue]:
        """The values of the ``stats`` command, keyed as on the wire (``current-jobs-ready``)."""
        return dict(self._running_handle().stats())

    def __repr__(self) -> str:
        if self._handle is None:
            state = "stopped" if self._stopping else "not started"
        else:
            state = "running" if self.running else "stopped"
        where = f" on {self._describe()}" if self._address is not None else ""
        return f"<beanpole.Server {state}{where}>"

    # -- helpers ------------------------------------------------------------------------

    def _describe(self) -> str:
        address = self._address
        if address is None:
            return "(not bound)"
        if isinstance(address, str):
            return f"unix:{address}"
        host, port = address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _started_handle(self) -> ServerHandle:
        handle = self._handle
        if handle is None:
            raise ServerError("this server has not been started; call start() first")
        return handle

    def _running_handle(self) -> ServerHandle:
        handle = self._started_handle()
        if self._stopping or not handle.running:
            raise ServerError(
                f"this server ({self._describe()}) has been stopped; "
                "create a new Server to serve again"
            )
        return handle

    @staticmethod
    def _wait(handle: ServerHandle, timeout: float | None) -> bool:
        # Short native waits, so that signal handlers get to run in between.
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while True:
            remaining = _WAIT_SLICE if deadline is None else deadline - time.monotonic()
            if handle.wait(max(min(remaining, _WAIT_SLICE), 0.0)):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False


def _start_native(cfg: Config) -> ServerHandle:
    """Start the native server; ``_core`` is imported here so ``import beanpole`` stays light."""
    try:
        from beanpole import _core
    except ImportError as err:
        raise ImportError(
            f"beanpole's native module is not available ({err}); "
            "build it with `maturin develop` or install a beanpole wheel"
        ) from err
    return _core.ServerHandle.start(
        cfg.listen,
        cfg.port,
        cfg.max_job_size,
        cfg.verbose,
        cfg.threads,
        binlog_dir=cfg.binlog_dir,
        fsync_ms=cfg.fsync_ms,
        no_fsync=cfg.no_fsync,
        segment_size=cfg.segment_size,
        skip_corrupt=cfg.skip_corrupt,
        max_connections=cfg.max_connections,
        max_memory=cfg.max_memory,
    )


def _lookup_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise ServerError(f"cannot become user {name!r}: no such user") from None


def _check_log_dir_for(account: pwd.struct_passwd, binlog_dir: str) -> None:
    """The log is opened before the switch of user, but its later files are made after
    it: refuse to start when ``account`` could not make them. Checked with the user's
    ids as the effective ones (root only; otherwise the switch itself fails later)."""
    if os.geteuid() != 0 or account.pw_uid == 0:
        return
    path = os.path.abspath(binlog_dir)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    os.setegid(account.pw_gid)
    os.seteuid(account.pw_uid)
    try:
        allowed = os.access(path, os.W_OK | os.X_OK, effective_ids=True)
    finally:
        os.seteuid(0)
        os.setegid(0)
    if not allowed:
        raise ServerError(
            f"user {account.pw_name!r} cannot write the log directory {binlog_dir} "
            "(or a directory on its path)"
        )


def _become(account: pwd.struct_passwd) -> None:
    """Switch the whole process to ``account``'s user and group, dropping other groups."""
    if os.geteuid() == account.pw_uid and os.getegid() == account.pw_gid:
        return
    os.setgroups([])
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
