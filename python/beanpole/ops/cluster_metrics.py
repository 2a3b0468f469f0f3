"""``/metrics`` of a cluster node (``beanpole serve --cluster ... --http``): the
cluster's queue under the usual names (read through the node's client address by a
:class:`~beanpole.ops.dashboard.node_source.NodeSource`, so the values are the
leader's, with ``beanpole_up`` 0 while the node is not ready) and this node's view of
the cluster under ``beanpole_cluster_*``:

=========================================  ===============================================
``beanpole_cluster_node_id``               this node's id
``beanpole_cluster_role{role}``            1 for this node's role, 0 for the others
``beanpole_cluster_term``                  the Raft term it is in
``beanpole_cluster_leader``                the leader's id it knows (0: none)
``beanpole_cluster_commit_index``          the last log index it applied
``beanpole_cluster_last_log_index``        the last index in its log
``beanpole_cluster_log_memory_bytes``       its Raft log's records kept in memory
``beanpole_cluster_ready``                 1 when ``/readyz`` answers 200
``beanpole_cluster_leader_changes_total``  leaders learnt of since start
``beanpole_cluster_member_up{node}``       1 if the member answered the last probes
``beanpole_cluster_follower_lag{node}``    leader only: its last index less the
                                           member's matching one
``beanpole_cluster_quorum_ack_age_seconds``  leader only: since a majority last
                                           acknowledged it
=========================================  ===============================================

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from beanpole.client.stats import StatsError
from beanpole.server.node import ROLES

if TYPE_CHECKING:
    from beanpole.ops.dashboard.node_source import NodeSource
    from beanpole.ops.metrics import MetricsBuilder
    from beanpole.server.node import Node

__all__ = ["NodeCollector", "queue_collector"]


def queue_collector(source: NodeSource, max_tubes: int) -> Callable[[MetricsBuilder], None]:
    """What fills the usual families of a node's ``/metrics``: the cluster's queue
    through the node's client address, ``beanpole_up`` 0 when it cannot be read."""

    def collect_into(builder: MetricsBuilder) -> None:
        try:
            stats, tubes = source.snapshot()
        except (StatsError, OSError):
            builder.add_up(False)
            return
        builder.add_up(True)
        builder.add(
            stats,
            tubes,
            max_tubes=max_tubes,
            hook_events_dropped=source.node.hook_events_dropped,
        )

    return collect_into


class NodeCollector(Collector):
    """The ``beanpole_cluster_*`` families, from :meth:`Node.view` once per scrape."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def collect(self) -> Iterable[Metric]:
        view = self._node.view()

        def gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, doc)
            if value is not None:
                family.add_metric([], float(value))
            return family

        role = GaugeMetricFamily(
            "beanpole_cluster_role", "1 for this node's role, 0 for the others.", labels=["role"]
        )
        for name in ROLES:
            role.add_metric([name], 1.0 if view["role"] == name else 0.0)
        out: list[Metric] = [
            gauge("beanpole_cluster_node_id", "This node's id.", view["id"]),
            role,
            gauge("beanpole_cluster_term", "The Raft term this node is in.", view["term"]),
            gauge(
                "beanpole_cluster_leader",
                "The id of the leader this node knows (0: none).",
                view["leader"] or 0,
            ),
            gauge(
                "beanpole_cluster_commit_index",
                "The last log index this node applied.",
                view["commit"],
            ),
            gauge(
                "beanpole_cluster_last_log_index",
                "The last index in this node's log.",
                view["last_log"],
            ),
            gauge(
                "beanpole_cluster_log_memory_bytes",
                "Bytes of this node's Raft log records kept in memory (--log-cache-bytes "
                "and the entries not yet committed).",
                view["log_memory_bytes"],
            ),
            gauge(
                "beanpole_cluster_ready",
                "1 when /readyz answers 200 (a leader known; as leader, a quorum).",
                1 if view["ready"] else 0,
            ),
        ]
        changes = CounterMetricFamily(
            "beanpole_cluster_leader_changes", "Leaders (or terms) this node learnt of."
        )
        changes.add_metric([], float(view["leader_changes"]))
        out.append(changes)
        up = GaugeMetricFamily(
            "beanpole_cluster_member_up",
            "1 if the member answered this node's last status probes.",
            labels=["node"],
        )
        lag = GaugeMetricFamily(
            "beanpole_cluster_follower_lag",
            "Leader only: log entries the leader has that the member has not matched.",
            labels=["node"],
        )
        for member in view["members"]:
            if member["up"] is not None:
                up.add_metric([str(member["id"])], 1.0 if member["up"] else 0.0)
            if view["role"] == "leader" and member["lag"] is not None:
                lag.add_metric([str(member["id"])], float(member["lag"]))
        out += [up, lag]
        ack = view["quorum_ack_ms"]
        if view["role"] == "leader" and ack is not None:
            out.append(
                gauge(
                    "beanpole_cluster_quorum_ack_age_seconds",
                    "Leader only: seconds since a majority of the voters last acknowledged it.",
                    ack / 1000.0,
                )
            )
        return [family for family in out if family.samples]
