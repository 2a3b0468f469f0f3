"""Admin hooks: Python callables told of job and server events.

The engine produces an event only for kinds that have a hook, puts it in a bounded
queue (never waiting: a full queue drops the event and counts it), and one Python
thread per server takes events from that queue in order and calls the hooks. The same
thread hands the engine's log lines to the ``beanpole`` logger. A hook that raises is
logged with its traceback; the other hooks and the server go on.

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, NamedTuple, TypeAlias

if TYPE_CHECKING:
    from beanpole._core import EventStream, ServerHandle

__all__ = ["KINDS", "NODE_KINDS", "Event", "Hook", "HookError", "load_hook"]

#: Every kind of event a hook can be registered for.
KINDS: Final = (
    "put",
    "reserve",
    "delete",
    "release",
    "bury",
    "kick",
    "touch",
    "timeout",
    "pause-tube",
    "drain",
    "shutdown",
    "log-error",
    "log-recovered",
    "connection-refused",
)
#: The kinds a cluster node's hooks get (``beanpole serve --cluster``): made by the
#: node's watch in Python (:mod:`beanpole.server.node`), not by the engine.
NODE_KINDS: Final = ("leader-elected", "node-down", "shutdown")
#: Queue size used while only log lines flow (no hook registered yet).
_MESSAGES_ONLY_QUEUE: Final = 1024
#: How often, at most, dropped events are reported in the log.
_DROP_REPORT_EVERY: Final = 1.0

logger = logging.getLogger("beanpole")


class Event(NamedTuple):
    """One job or server event.

    ``kind`` is one of :data:`KINDS`; ``job_id``, ``tube`` and ``priority`` describe the
    job (None for server events; ``pause-tube`` has a ``tube``); ``at`` is the Unix time
    of the event (for job events, the kernel's coarse clock: exact to a few ms);
    ``detail`` says more where there is more to say (the pause in seconds, the log
    error).
    """

    kind: str
    job_id: int | None
    tube: str | None
    priority: int | None
    at: float
    detail: str | None

    # A named tuple, not a dataclass: the engine builds one per event straight from
    # its six fields (as ``tuple.__new__`` does), at a fraction of the cost of a
    # frozen dataclass, and it is just as immutable.


Hook: TypeAlias = Callable[[Event], object]


class HookError(ValueError):
    """A hook cannot be registered or loaded (unknown kind, bad MODULE:FUNCTION)."""


def check_kind(kind: str, kinds: tuple[str, ...] = KINDS) -> str:
    """``kind`` if it is one of ``kinds`` (a single server's, or :data:`NODE_KINDS`);
    else :class:`HookError` naming the kinds there are."""
    if kind in kinds:
        return kind
    if kind in KINDS or kind in NODE_KINDS:
        where = "single servers" if kind in KINDS else "cluster nodes"
        raise HookError(
            f"event kind {kind!r} is for {where} only; kinds here: {', '.join(kinds)}"
        )
    raise HookError(f"unknown event kind {kind!r}; kinds: {', '.join(kinds)}")


def load_hook(spec: str) -> Callable[..., object]:
    """Import ``MODULE:FUNCTION`` and return the function."""
    module_name, _, function_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name.strip())
    except Exception as err:
        raise HookError(f"cannot import hook module {module_name!r}: {err}") from None
    function = getattr(module, function_name.strip(), None)
    if not callable(function):
        raise HookError(f"{spec!r}: module {module_name!r} has no function {function_name!r}")
    return function  # type: ignore[no-any-return]


class _DropReport:
    """Logs the events the full queue threw away, at most once a second."""

    def __init__(self, handle: ServerHandle) -> None:
        self._handle = handle
        self._reported = 0
        self._last = time.monotonic() - _DROP_REPORT_EVERY

    def check(self, *, final: bool) -> None:
        dropped = self._handle.events_dropped
        now = time.monotonic()
        if dropped > self._reported and (final or now - self._last >= _DROP_REPORT_EVERY):
            logger.warning(
                "hooks are behind: %d events dropped (%d in all); "
                "a larger --hook-queue or faster hooks would keep them",
                dropped - self._reported,
                dropped,
            )
            self._reported, self._last = dropped, now


class Dispatcher:
    """The hooks of one server and the thread that calls them."""

    def __init__(self, queue: int) -> None:
        self._queue = queue
        # Guards `_hooks` and `_stream`: registration may come from any thread while
        # the dispatch thread reads them; held only to read or swap the references.
        self._lock = threading.Lock()
        self._hooks: dict[str, tuple[Hook, ...]] = {}
        self._handle: ServerHandle | None = None
        self._stream: EventStream | None = None
        self._full_queue = False
        self._thread: threading.Thread | None = None

    def add(self, kind: str, fn: Hook) -> None:
        with self._lock:
            self._hooks[kind] = (*self._hooks.get(kind, ()), fn)
            handle = self._handle
        if handle is not None:
            self._subscribe(handle)

    def attach(self, handle: ServerHandle) -> None:
        """Start delivering the events of a server that has just started."""
        with self._lock:
            self._handle = handle
        handle.set_log_messages(True)
        self._subscribe(handle)
        thread = threading.Thread(target=self._run, name="beanpole-hooks", daemon=True)
        self._thread = thread
        thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the thread to deliver what is queued (the server has stopped)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _subscribe(self, handle: ServerHandle) -> None:
        """Open a queue of the configured size once a hook exists (until then a small
        one carries the log lines), and ask for exactly the kinds that have hooks."""
        with self._lock:
            kinds = sorted(self._hooks)
            need_full = bool(kinds) and not self._full_queue
            if self._stream is None or need_full:
                self._full_queue = bool(kinds)
                size = self._queue if kinds else min(self._queue, _MESSAGES_ONLY_QUEUE)
                # A new queue replaces the old one, whose stream ends once drained.
                self._stream = handle.subscribe_events(size)
        handle.set_event_kinds(kinds)

    def _run(self) -> None:
        handle = self._handle
        assert handle is not None
        drops = _DropReport(handle)
        stream = self._stream
        while stream is not None:
            # The engine's side calls the hooks: it builds each Event and calls the
            # kind's hooks in order, a batch at a time, with no Python loop between.
            taken = stream.deliver(
                Event, self._hooks, hook_failed, _log_message, 4096, _DROP_REPORT_EVERY
            )
            if taken is None:
                with self._lock:
                    replaced = self._stream is not stream
                    stream = self._stream if replaced else None
                continue
            drops.check(final=False)
        drops.check(final=True)


def hook_failed(fn: Hook, event: Event, error: BaseException) -> None:
    name = getattr(fn, "__qualname__", repr(fn))
    logger.error("hook %s for %r failed", name, event.kind, exc_info=error)


def _log_message(level: int, text: str) -> None:
    logger.log(level, "%s", text)
