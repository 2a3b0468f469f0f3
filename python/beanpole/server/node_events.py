"""The hook thread of a cluster node: events made in Python (``leader-elected``,
``node-down``, ``shutdown``; :data:`beanpole.server.hooks.NODE_KINDS`) delivered to
the node's hooks as :class:`beanpole.server.hooks.Event` objects, in order, on one
thread (``beanpole-hooks``), as a single server's engine events are.

The queue is bounded (``--hook-queue``): a full queue drops the event and counts it,
so the node's watch never waits for a hook. A hook that raises is logged with its
traceback (the same log line as a single server's) and the other hooks go on.

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Final

from beanpole.server.hooks import NODE_KINDS, Event, Hook, check_kind, hook_failed, logger

__all__ = ["NodeDispatcher", "detail_fields"]

#: How long :meth:`NodeDispatcher.close` waits for the hooks to finish what is queued.
_JOIN_TIMEOUT: Final = 10.0


def detail_fields(detail: str | None) -> dict[str, str]:
    """A node event's ``detail`` as its fields: ``"leader=2 term=3"`` ->
    ``{"leader": "2", "term": "3"}``. ``reason=`` comes last and takes the rest of the
    line (it may hold spaces)."""
    fields: dict[str, str] = {}
    rest = detail or ""
    while rest:
        key, _eq, rest = rest.partition("=")
        if key == "reason":
            fields[key] = rest
            break
        value, _sp, rest = rest.partition(" ")
        fields[key] = value
    return fields


class NodeDispatcher:
    """A node's hooks and the thread that calls them; events come from :meth:`emit`."""

    def __init__(self, queue: int) -> None:
        self._limit = queue
        # One condition guards the hooks, the queue and the closed flag: emit (the
        # watch's thread), add (any thread) and the hook thread each hold it only to
        # read or swap them, never while a hook runs.
        self._cond = threading.Condition()
        self._hooks: dict[str, tuple[Hook, ...]] = {}
        self._queue: collections.deque[Event] = collections.deque()
        self._closed = False
        self.dropped = 0
        self._thread: threading.Thread | None = None

    def add(self, kind: str, fn: Hook) -> None:
        check_kind(kind, NODE_KINDS)
        with self._cond:
            self._hooks[kind] = (*self._hooks.get(kind, ()), fn)

    def wanted(self, kind: str) -> bool:
        """Whether a hook is registered for ``kind`` (events of other kinds are not made)."""
        return kind in self._hooks

    def start(self) -> None:
        thread = threading.Thread(target=self._run, name="beanpole-hooks", daemon=True)
        self._thread = thread
        thread.start()

    def emit(self, kind: str, detail: str | None) -> None:
        """Queue an event of ``kind`` for the hooks (dropped and counted when full)."""
        if kind not in self._hooks:
            return
        event = Event(kind, None, None, None, time.time(), detail)
        with self._cond:
            if self._closed:
                return
            if len(self._queue) >= self._limit:
                self.dropped += 1
                return
            self._queue.append(event)
            self._cond.notify()

    def close(self) -> None:
        """Deliver what is queued, then end the thread (waits up to 10 s for it)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT)

    def _run(self) -> None:
        reported = 0
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = list(self._queue)
                self._queue.clear()
                hooks = dict(self._hooks)
            for event in batch:
                for fn in hooks.get(event.kind, ()):
                    try:
                        fn(event)
                    except Exception as err:  # a failing hook is logged, never fatal
                        hook_failed(fn, event, err)
            dropped = self.dropped
            if dropped > reported:
                logger.warning(
                    "hooks are behind: %d node events dropped (%d in all)",
                    dropped - reported,
                    dropped,
                )
                reported = dropped
