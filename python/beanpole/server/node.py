"""A cluster node watched from Python: :class:`Node` wraps a started
``beanpole._core.ClusterNode`` (``beanpole serve --cluster``) with what operators
need of it: its view of the cluster (:meth:`Node.view`, read by ``/metrics`` and the
dashboard), the readiness rule of ``/readyz`` (:meth:`Node.not_ready`), and hooks
for ``leader-elected``, ``node-down`` and ``shutdown`` events.

One watch thread (``beanpole-node-watch``) reads the node's status every
``poll_every`` seconds (an in-process call: no I/O) and asks every member for its
status over its peer address every ``probe_every`` seconds
(``_core.cluster_status``, each answer within ``probe_timeout``):

- ``leader-elected`` when this node learns of a leader it had not seen in that term
  (at start, once the first leader is known; after every election); ``detail`` is
  ``leader=ID term=TERM``;
- ``node-down`` when a member that answered before fails ``down_after`` probes in a
  row (this node's view: a member cut off from it but not from the others is down
  here); ``detail`` is ``node=ID reason=WHY``. A member that answers again may be
  reported down again later.

Server layer: imports the clients' modules, the settings and the native module at most;
nothing of ``beanpole.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, overload

from beanpole import _core
from beanpole.server.node_events import NodeDispatcher

if TYPE_CHECKING:
    from beanpole.server.hooks import Hook

__all__ = ["ROLES", "Member", "Node"]

#: Every role a node reports (``down``: stopped).
ROLES: Final = ("leader", "follower", "candidate", "learner", "down")
_H = TypeVar("_H", bound="Hook")


@dataclass
class Member:
    """Another member as the probes see it."""

    id: int
    #: Probes that failed in a row (0: it answered the last one).
    fails: int = 0
    #: It answered at least once since this node started.
    seen: bool = False
    #: The node-down event has been sent for this run of failures.
    reported: bool = False
    #: Its last answer (``_core.cluster_status``'s row), or the failed one's.
    row: dict[str, Any] | None = None


class Node:
    """Node ``node_id`` of the cluster in ``cluster_file``, watched from :meth:`start`
    (given the started native node) until :meth:`stop` (or :meth:`close`, which
    leaves the native node running). Hooks may be added before the start.
    ``election_timeout_ms`` is the longest election timeout the node runs with (800
    for ``serve --cluster``): a leader no majority has acknowledged for longer is not
    ready."""

    def __init__(
        self,
        cluster_file: str | os.PathLike[str],
        node_id: int,
        *,
        election_timeout_ms: int = 800,
        hook_queue: int = 65536,
        poll_every: float = 0.1,
        probe_every: float = 0.5,
        probe_timeout: float = 0.5,
        down_after: int = 2,
    ) -> None:
        self.native: _core.ClusterNode | None = None
        self.id = node_id
        self.cluster_file = cluster_file
        self.election_timeout_ms = election_timeout_ms
        self._poll_every = poll_every
        self._probe_every = probe_every
        self._probe_timeout = probe_timeout
        self._down_after = down_after
        self._hooks = NodeDispatcher(hook_queue)
        # Guards the members and the leader last announced: the watch thread writes
        # them, the HTTP workers read them; held only to copy or update them.
        self._lock = threading.Lock()
        self._members: dict[int, Member] = {}
        self._announced: tuple[int, int] | None = None
        self.leader_changes = 0
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def address(self) -> tuple[str, int]:
        """Where this node's clients connect (it serves them, or relays them)."""
        return self._native().address

    def _native(self) -> _core.ClusterNode:
        native = self.native
        if native is None:
            raise RuntimeError(f"node {self.id} has not been started")
        return native

    @property
    def hook_events_dropped(self) -> int:
        """Node events dropped because the hooks' queue was full."""
        return self._hooks.dropped

    # -- hooks ----------------------------------------------------------------------------

    @overload
    def hook(self, kind: str) -> Callable[[_H], _H]: ...
    @overload
    def hook(self, kind: str, fn: _H) -> _H: ...

    def hook(self, kind: str, fn: _H | None = None) -> _H | Callable[[_H], _H]:
        """Call ``fn(event)`` for every event of ``kind`` (one of
        :data:`beanpole.server.hooks.NODE_KINDS`); works as a decorator too. Another
        kind raises :class:`beanpole.server.hooks.HookError`."""
        if fn is None:

            def register(f: _H) -> _H:
                self._hooks.add(kind, f)
                return f

            return register
        self._hooks.add(kind, fn)
        return fn

    # -- life -----------------------------------------------------------------------------

    def start(self, native: _core.ClusterNode) -> None:
        """Watch ``native`` (started, with this node's id): start the hook thread and
        the watch."""
        if native.node != self.id:
            raise ValueError(f"native node {native.node} is not node {self.id}")
        self.native = native
        self._hooks.start()
        thread = threading.Thread(target=self._watch, name="beanpole-node-watch", daemon=True)
        self._thread = thread
        thread.start()

    def close(self) -> None:
        """Stop watching (the hooks get what was queued); the native node runs on."""
        self._halt.set()
        thread = self._thread
        if thread is not None:
            thread.join()
        self._hooks.close()

    def stop(self) -> None:
        """Stop watching, stop the native node, then a ``shutdown`` event."""
        if self._stopped:
            return
        self._stopped = True
        self._halt.set()
        thread = self._thread
        if thread is not None:
            thread.join()
        if self.native is not None:
            self.native.stop()
        self._hooks.emit("shutdown", f"node={self.id}")
        self._hooks.close()

    # -- the watch ------------------------------------------------------------------------

    def _watch(self) -> None:
        native = self._native()
        next_probe = 0.0
        while not self._halt.is_set():
            status = native.status()
            self._see_leader(status)
            if time.monotonic() >= next_probe:
                self._probe(status)
                next_probe = time.monotonic() + self._probe_every
            self._halt.wait(self._poll_every)

    def _see_leader(self, status: dict[str, Any]) -> None:
        leader, term = status.get("leader"), int(status.get("term") or 0)
        if leader is None:
            return
        seen = (int(leader), term)
        with self._lock:
            if seen == self._announced:
                return
            self._announced = seen
            self.leader_changes += 1
        self._hooks.emit("leader-elected", f"leader={seen[0]} term={seen[1]}")

    def _probe(self, status: dict[str, Any]) -> None:
        try:
            rows = _core.cluster_status(self.cluster_file, self._probe_timeout)
        except (OSError, ValueError):  # the file became unreadable: nothing learnt
            return
        members = set(status.get("voters") or ()) | set(status.get("learners") or ())
        down: list[tuple[int, str]] = []
        with self._lock:
            for row in rows:
                node = int(row["id"])  # type: ignore[arg-type]
                if node == self.id or (members and node not in members):
                    self._members.pop(node, None)
                    continue
                member = self._members.setdefault(node, Member(node))
                member.row = dict(row)
                if row["role"] != "down":
                    member.fails, member.seen, member.reported = 0, True, False
                    continue
                member.fails += 1
                if member.seen and not member.reported and member.fails >= self._down_after:
                    member.reported = True
                    down.append((node, str(row.get("error") or "no answer")))
        for node, reason in down:
            self._hooks.emit("node-down", f"node={node} reason={reason}")

    # -- what it shows --------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The native node's status now (``_core.ClusterNode.status``); role
        ``down`` before the start."""
        native = self.native
        if native is None:
            return {"id": self.id, "role": "down", "term": 0, "leader": None, "applied": 0,
                    "last_log": 0, "serving": False, "log_memory_bytes": 0}  # fmt: skip
        return dict(native.status())

    def not_ready(self, status: dict[str, Any] | None = None) -> str | None:
        """Why this node cannot have a client's change acknowledged now, or None: it
        knows no leader, or it leads and no majority acknowledged it within the
        election timeout, or it leads and does not serve yet."""
        if self.native is None:
            return "starting"
        if status is None:
            status = self.status()
        if status["role"] == "down":
            return "stopped"
        leader = status.get("leader")
        if leader is None:
            return (
                f"no leader known (role {status['role']}, term {status['term']}): "
                "an election is under way or no majority of the voters answers"
            )
        if status["role"] != "leader":
            with self._lock:
                member = self._members.get(int(leader))
                gone = member is not None and member.fails >= self._down_after
            if gone:
                return f"leader {leader} does not answer (an election will follow)"
            return None
        ack = status.get("millis_since_quorum_ack")
        limit = self.election_timeout_ms
        if ack is None or ack > limit:
            ago = "never" if ack is None else f"{ack} ms ago"
            return (
                f"no quorum: a majority of the voters last acknowledged this leader {ago} "
                f"(the election timeout is {limit} ms); changes cannot be committed"
            )
        if not status.get("serving"):
            return "this node leads but does not serve clients yet (applying the log)"
        return None

    def view(self) -> dict[str, Any]:
        """This node's role, term, leader, commit index, readiness and every member's
        lag, as the dashboard's cluster panel and ``/metrics`` show them."""
        status = self.status()
        reason = self.not_ready(status)
        last_log = int(status.get("last_log") or 0)
        matched = status.get("matched") or {}
        with self._lock:
            members = {n: (m.fails, dict(m.row or {})) for n, m in self._members.items()}
            changes = self.leader_changes
        rows = []
        for node in sorted({*members, *(int(n) for n in matched)} - {self.id}):
            fails, row = members.get(node, (0, {}))
            if status["role"] == "leader":
                index = matched.get(node)
                lag = None if index is None else max(last_log - int(index), 0)
            else:
                lag = row.get("lag")
            rows.append(
                {
                    "id": node,
                    "up": fails < self._down_after if row else None,
                    "role": row.get("role"),
                    "term": row.get("term"),
                    "commit": row.get("commit"),
                    "lag": lag,
                    "error": row.get("error"),
                }
            )
        ack = status.get("millis_since_quorum_ack")
        return {
            "id": self.id,
            "role": status["role"],
            "term": status["term"],
            "leader": status.get("leader"),
            "commit": status.get("applied"),
            "last_log": last_log,
            "log_memory_bytes": int(status.get("log_memory_bytes") or 0),
            "serving": bool(status.get("serving")),
            "voters": list(status.get("voters") or ()),
            "learners": list(status.get("learners") or ()),
            "quorum_ack_ms": ack,
            "election_timeout_ms": self.election_timeout_ms,
            "ready": reason is None,
            "reason": reason,
            "leader_changes": changes,
            "members": rows,
        }
