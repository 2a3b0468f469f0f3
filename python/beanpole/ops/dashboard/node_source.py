"""The queue of a cluster, as one of its nodes shows it to the dashboard and to
``/metrics``: :class:`NodeSource` is a :class:`~beanpole.ops.dashboard.sources.RemoteSource`
on the node's own client address (every node serves clients: the leader itself, a
follower by relaying to the leader), so the values are the leader's, read over the
protocol as ``beanpole exporter`` reads a remote server.

Without a quorum a command through the node would wait for a commit that cannot come
(then ``INTERNAL_ERROR``), so while the node is not ready
(:meth:`beanpole.server.node.Node.not_ready`) the stats calls fail at once with the
reason instead of waiting.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from beanpole.client.snapshot import TubeRow
from beanpole.client.stats import StatsError
from beanpole.ops.dashboard.sources import RemoteSource, Stats

if TYPE_CHECKING:
    from beanpole.server.node import Node

__all__ = ["NodeSource", "NotReadyError"]

#: Seconds a stats exchange through the node may take (a commit, or a relay to the
#: leader, is milliseconds; an exchange cut by a change of leader is tried once more).
TIMEOUT: Final = 2.0


class NotReadyError(StatsError):
    """The node has no quorum or knows no leader: the queue cannot be read now."""


class NodeSource(RemoteSource):
    """The cluster's queue through ``node``'s client address, named ``node N``."""

    def __init__(self, node: Node, timeout: float = TIMEOUT) -> None:
        super().__init__(node.address, f"node {node.id}", timeout)
        self.node = node

    def _check(self) -> None:
        reason = self.node.not_ready()
        if reason is not None:
            raise NotReadyError(f"the cluster's queue cannot be read here now: {reason}")

    def snapshot(self) -> tuple[Stats, list[TubeRow]]:
        self._check()
        try:
            return super().snapshot()
        except StatsError:
            # The connection (relayed to a leader that is gone) broke; the stats
            # client reconnects, reaching whichever node leads now.
            self._check()
            return super().snapshot()

    def server_stats(self) -> Stats:
        self._check()
        try:
            return super().server_stats()
        except StatsError:
            self._check()
            return super().server_stats()
