"""An embeddable beanpole server: start, stop, drain and signal handling.

The queue itself runs in Rust (``beanpole._core.ServerHandle``) on its own threads; this
module adds the lifecycle rules, dropping privileges after the socket is bound, and the
signal handling of :meth:`Server.serve_forever`::

    with Server(port=0) as srv:
        host, port = srv.address
        ...

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeAlias, TypeVar, Unpack, overload

from beanpole.config import Config, ConfigChanges
from beanpole.server.hooks import Dispatcher, Hook, check_kind
from beanpole.server.privileges import PrivilegeError, become, check_log_dir_for, lookup_user

if TYPE_CHECKING:
    from beanpole._core import Admin, ServerHandle, _StatValue
    from beanpole.client.snapshot import Snapshot

__all__ = ["Server", "ServerError"]

#: How long a wait blocks in native code before Python gets a chance to run signal handlers.
_WAIT_SLICE: Final = 0.25
_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
_DRAIN_SIGNAL: Final = signal.SIGUSR1
_RELOAD_SIGNAL: Final = signal.SIGHUP
_tls_log: Final = logging.getLogger("beanpole.tls")
_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
_H = TypeVar("_H", bound=Hook)


class ServerError(RuntimeError):
    """A server was used in a way its state does not allow, or could not switch user."""


class Server:
    """One beanpole server, running in this process on threads of its own.

    ``Server(config, **overrides)`` takes a :class:`~beanpole.Config` (default: the
    defaults) with any fields replaced by keyword arguments, e.g. ``Server(port=0)``. Nothing
    happens until :meth:`start` (or ``with``); a server starts at most once, and once
    stopped it stays stopped.

    ``listen_fds`` are listening sockets inherited from a service manager (see
    :func:`beanpole.server.systemd.listen_fds`); when given they are served instead of the
    ``listen`` addresses. The server takes them over: they are closed once :meth:`start`
    returns (the engine serves copies of them).
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        listen_fds: Sequence[int] = (),
        **overrides: Unpack[ConfigChanges],
    ) -> None:
        base = Config() if config is None else config
        self._config = base.replace(**overrides) if overrides else base
        self._listen_fds = tuple(listen_fds)
        self._lock = threading.Lock()
        self._handle: ServerHandle | None = None
        self._address: tuple[str, int] | str | None = None
        self._addresses: tuple[tuple[str, int] | str, ...] = ()
        self._stopping = False
        self._hooks = Dispatcher(self._config.hook_queue)
        # Admin calls (see the section at the end of the class).
        self._admin: Admin | None = None

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
            try:
                account = lookup_user(cfg.user) if cfg.user is not None else None
                if account is not None and cfg.binlog_dir is not None:
                    check_log_dir_for(account, cfg.binlog_dir)
            except PrivilegeError as err:
                raise ServerError(str(err)) from None
            # Before switching user: the files may be readable by root only.
            self._prepare_beside()
            try:
                handle = _start_native(cfg, self._listen_fds)
            finally:
                _close_all(self._listen_fds)  # the engine serves its own copies
                self._listen_fds = ()
            if account is not None:
                try:
                    become(account)
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
            self._addresses = tuple(handle.addresses)
            self._hooks.attach(handle)
            try:
                self._start_beside(handle)
            except BaseException:
                handle.stop()
                self._stopping = True
                raise
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
        # What runs beside the engine first (the HTTP endpoint and the dashboard's
        # sampler of beanpole.Server): until it is gone it may still ask this server for
        # a snapshot, which a stopping server refuses.
        self._stop_beside()
        with self._lock:
            first = not self._stopping
            self._stopping = True
        if first:
            handle.stop(timeout)
            # The hooks get what was queued before the stop (the shutdown event last).
            self._hooks.join(timeout)
        else:
            self._wait(handle, timeout)

    def drain(self) -> None:
        """Enter drain mode: from now on every ``put`` is answered ``DRAINING``."""
        self._running_handle().drain()

    @overload
    def hook(self, kind: str) -> Callable[[_H], _H]: ...
    @overload
    def hook(self, kind: str, fn: _H) -> _H: ...

    def hook(self, kind: str, fn: _H | None = None) -> _H | Callable[[_H], _H]:
        """Call ``fn(event)`` for every event of ``kind`` (see :data:`beanpole.server.hooks.KINDS`).

        Works before or after :meth:`start`, and as a decorator: ``@server.hook("bury")``.
        Hooks run on one thread of their own, in the order the events happened; the server
        never waits for them. An unknown kind raises :class:`beanpole.server.hooks.HookError`.
        """
        check_kind(kind)
        if fn is None:

            def register(f: _H) -> _H:
                self._hooks.add(kind, f)
                return f

            return register
        self._hooks.add(kind, fn)
        return fn

    @property
    def hook_events_dropped(self) -> int:
        """Events thrown away because the hooks' queue was full (``--hook-queue``)."""
        handle = self._handle
        return 0 if handle is None else handle.events_dropped

    def reload_tls(self) -> bool:
        """Read the TLS certificate, key and client CA files again.

        Connections accepted from now on use the new files; open connections keep the
        session they have. This covers the ``tls:`` listeners and, with
        :class:`beanpole.Server`, an HTTPS endpoint (``http`` of ``tls:HOST:PORT``).
        Returns False when the server has neither. Raises :class:`OSError` when a file
        cannot be read or used; the certificates in force are then kept.
        """
        return self._running_handle().reload_tls()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops, at most ``timeout`` seconds; True if it stopped."""
        return self._wait(self._started_handle(), timeout)

    def serve_forever(
        self,
        *,
        on_ready: Callable[[Self], None] | None = None,
        on_signal: Callable[[signal.Signals], None] | None = None,
    ) -> None:
        """Serve until the server is stopped; start it first if needed.

        In the main thread, SIGINT and SIGTERM stop the server cleanly, SIGUSR1 puts it
        in drain mode and SIGHUP re-reads the TLS files (:meth:`reload_tls`; a failure is
        logged on the ``beanpole.tls`` logger and the certificates in force are kept).
        The handlers are installed before the server starts and the previous ones are
        restored on return. In another thread no handlers are installed and this
        returns once someone calls :meth:`stop`.

        ``on_ready(server)`` is called once the server is listening and the handlers are in
        place (so a signal sent from then on is acted on); ``on_signal(sig)`` is called for
        each of these signals after it has been acted on. The server is stopped when this
        returns, whatever the reason.
        """
        stop_requested = threading.Event()
        drain_requested = threading.Event()
        main = threading.current_thread() is threading.main_thread()

        def on_stop_signal(signum: int, frame: FrameType | None) -> None:
            if not stop_requested.is_set():
                stop_requested.set()
                # A second SIGTERM/SIGINT during the shutdown ends the process at once.
                for sig in _STOP_SIGNALS:
                    signal.signal(sig, signal.SIG_DFL)
            if on_signal is not None:
                on_signal(signal.Signals(signum))

        def on_drain_signal(signum: int, frame: FrameType | None) -> None:
            drain_requested.set()
            handle = self._handle
            if handle is not None and not stop_requested.is_set():
                handle.drain()
            if on_signal is not None:
                on_signal(signal.Signals(signum))

        def on_reload_signal(signum: int, frame: FrameType | None) -> None:
            handle = self._handle
            if handle is not None and not stop_requested.is_set():
                try:
                    if self.reload_tls():
                        _tls_log.info("SIGHUP: TLS certificates re-read")
                    else:
                        _tls_log.info("SIGHUP: no tls: listener, nothing to re-read")
                except (OSError, RuntimeError) as err:
                    _tls_log.error(
                        "SIGHUP: the TLS certificates in force are kept: %s", err
                    )
            if on_signal is not None:
                on_signal(signal.Signals(signum))

        previous: dict[signal.Signals, _SignalHandler] = {}
        # Python's C-level handler writes each signal's number to this pipe the moment
        # it arrives; the native wait watches it, so a signal is acted on at once even
        # though the main thread is blocked in native code. (A pipe, not a socket pair:
        # the same for poll and read, and no import of the socket module on the way to
        # the first connection.)
        wake_r: int | None = None
        wake_w: int | None = None
        old_wakeup = -1
        try:
            if main:
                wake_r, wake_w = os.pipe()
                os.set_blocking(wake_r, False)
                os.set_blocking(wake_w, False)
                old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
                for sig in _STOP_SIGNALS:
                    previous[sig] = signal.signal(sig, on_stop_signal)
                previous[_DRAIN_SIGNAL] = signal.signal(_DRAIN_SIGNAL, on_drain_signal)
                previous[_RELOAD_SIGNAL] = signal.signal(_RELOAD_SIGNAL, on_reload_signal)
            if self._handle is None:
                self.start()
            handle = self._running_handle()
            if drain_requested.is_set():  # SIGUSR1 arrived while the server was starting
                handle.drain()
            if on_ready is not None:
                on_ready(self)
            while not stop_requested.is_set():
                if wake_r is None:
                    if handle.wait(None):
                        break
                    continue
                finished, _ = handle.wait_signal(
                    wake_r,
                    None,
                    stop_signals=[int(s) for s in _STOP_SIGNALS],
                    drain_signals=[int(_DRAIN_SIGNAL)],
                )
                if finished:
                    break
                # The Python handlers of the signals just read run here.
        finally:
            try:
                self.stop()
            finally:
                if main:
                    signal.set_wakeup_fd(old_wakeup)
                for sig, old in previous.items():
                    signal.signal(sig, signal.SIG_DFL if old is None else old)
                for fd in (wake_r, wake_w):
                    if fd is not None:
                        os.close(fd)

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
        """The first address listened on: ``(host, port)`` actually bound (the real port
        when 0 was asked), or the unix socket path. Still available after :meth:`stop`;
        :attr:`addresses` has them all."""
        if self._address is None:
            raise ServerError("this server has not been started")
        return self._address

    @property
    def addresses(self) -> tuple[tuple[str, int] | str, ...]:
        """Every address the server listens on, in order, each as :attr:`address` gives
        it (inherited sockets first). Still available after :meth:`stop`."""
        if self._address is None:
            raise ServerError("this server has not been started")
        return self._addresses

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
        """The values of the ``stats`` command, keyed as on the wire (``current-jobs-ready``;
        ``version`` is the protocol's, ``1.13``), plus figures the wire does not carry:
        ``beanpole-version`` (beanpole's own), ``connections-refused``, ``job-bytes``, and
        the log's and TLS's health where they apply."""
        return dict(self._running_handle().stats())

    # -- admin calls, metrics and the HTTP endpoint ---------------------------------------

    def tube_stats(self, name: str) -> dict[str, _StatValue]:
        """The values of ``stats-tube NAME``; :class:`~beanpole.NotFoundError` if there is
        no such tube."""
        return dict(_admin_call(self._admin_handle().tube_stats, name))

    def job_stats(self, id: int) -> dict[str, _StatValue]:
        """The values of ``stats-job ID``; :class:`~beanpole.NotFoundError` if there is
        no such job."""
        return dict(_admin_call(self._admin_handle().job_stats, id))

    def tubes(self) -> list[str]:
        """The names of every tube, in ``list-tubes`` order."""
        return self._admin_handle().tubes()

    def pause(self, tube: str, seconds: int) -> None:
        """``pause-tube``: no job of ``tube`` is reserved for ``seconds`` (0 unpauses)."""
        _admin_call(self._admin_handle().pause, tube, seconds)

    def kick(self, tube: str, n: int) -> int:
        """``kick`` on ``tube``: up to ``n`` buried jobs, or delayed ones if none is
        buried. Returns how many were kicked."""
        return _admin_call(self._admin_handle().kick, tube, n)

    def admin(self) -> Admin:
        """The native admin calls (``beanpole._core.Admin``) behind the methods above,
        with those the dashboard's actions use: ``peek``, ``peek_job``, ``kick_job``,
        ``delete`` and ``clear``. A missing tube or job raises ``KeyError``."""
        return self._admin_handle()

    def snapshot(self, max_tubes: int | None = None) -> Snapshot:
        """``stats`` (with the log's health) and every tube's ``stats-tube``, read under
        one acquisition of the store lock: what the metrics are built from.

        With ``max_tubes``, only the tubes holding the most jobs are listed (ties go to
        the tube listed first) and the others are summed in ``other``.
        """
        from beanpole.client.snapshot import Snapshot

        admin = self._admin_handle()
        server, tubes, other = admin.snapshot(max_tubes)
        return Snapshot(server, tubes, other, admin.last_snapshot_lock_seconds)

    @property
    def last_snapshot_lock_seconds(self) -> float:
        """How long the latest :meth:`snapshot` (e.g. a ``/metrics`` scrape) held the
        store lock, in seconds; 0.0 before the first."""
        return 0.0 if self._admin is None else self._admin.last_snapshot_lock_seconds

    def _admin_handle(self) -> Admin:
        handle = self._running_handle()
        if self._admin is None:
            from beanpole._core import Admin

            self._admin = Admin(handle)
        return self._admin

    # -- what a layer above runs beside the engine ---------------------------------------

    def _prepare_beside(self) -> None:
        """Read what :meth:`_start_beside` will need, before the process switches user.

        This class serves the beanstalkd protocol only: the HTTP endpoint and the
        dashboard are :class:`beanpole.Server`'s (``beanpole.ops.served``), which
        overrides these three methods; here ``http`` is refused rather than ignored.
        """
        if self._config.http is not None:
            raise ServerError(
                "http is served by beanpole.Server; beanpole.server.Server serves the "
                "protocol only"
            )

    def _start_beside(self, handle: ServerHandle) -> None:
        """Start what runs beside the engine, once it serves (under the start lock). If
        this raises, the engine is stopped and the error goes to the caller of start."""

    def _stop_beside(self) -> None:
        """Stop what :meth:`_start_beside` started; called first by :meth:`stop`."""

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


_R = TypeVar("_R")


def _admin_call(call: Callable[..., _R], *args: object) -> _R:
    """Run an admin call, turning a missing tube or job into NotFoundError."""
    try:
        return call(*args)
    except KeyError as err:
        from beanpole.client.snapshot import NotFoundError

        raise NotFoundError(*err.args) from None


def _start_native(cfg: Config, listen_fds: tuple[int, ...] = ()) -> ServerHandle:
    """Start the native server; ``_core`` is imported here so ``import beanpole`` stays light."""
    try:
        from beanpole import _core
    except ImportError as err:
        raise ImportError(
            f"beanpole's native module is not available ({err}); "
            "build it with `maturin develop` or install a beanpole wheel"
        ) from err
    return _core.ServerHandle.start(
        [] if listen_fds else list(cfg.listen),
        cfg.port,
        cfg.max_job_size,
        cfg.verbose,
        cfg.threads,
        binlog_dir=cfg.binlog_dir,
        fsync_ms=cfg.fsync_ms,
        no_fsync=cfg.no_fsync,
        segment_size=cfg.segment_size,
        skip_corrupt=cfg.skip_corrupt,
        unix_mode=cfg.unix_mode,
        listen_fds=list(listen_fds),
        tls_cert=cfg.tls_cert,
        tls_key=cfg.tls_key,
        tls_client_ca=cfg.tls_client_ca,
        max_connections=cfg.max_connections,
        max_memory=cfg.max_memory,
    )


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
