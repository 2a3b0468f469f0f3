"""Prometheus metrics from stats: the same names for an embedded beanpole server
(``beanpole serve --http``) and for remote servers of any kind (``beanpole exporter``).

A scrape reads one snapshot per server (``stats`` and every tube's ``stats-tube``) and
turns it into metric families here; nothing is kept between scrapes. Per-tube series are
capped: the ``max_tubes`` tubes holding the most jobs get series of their own and the rest
are summed under ``tube="_other"``.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from beanpole.client.snapshot import StatValue, TubeRow

__all__ = ["OTHER_TUBE", "MetricsBuilder", "SnapshotCollector", "registry_of"]

#: The tube label of the series that sum the tubes beyond the cap.
OTHER_TUBE: Final = "_other"
#: Job states of ``beanpole_jobs``, with their column in a :data:`TubeRow`.
_STATES: Final = (("urgent", 1), ("ready", 2), ("reserved", 3), ("delayed", 4), ("buried", 5))
_CONNECTIONS: Final = (
    ("producers", "current-producers"),
    ("workers", "current-workers"),
    ("waiting", "current-waiting"),
    ("total", "current-connections"),
)


def _num(stats: Mapping[str, StatValue], key: str) -> float:
    value = stats.get(key, 0)
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return 0.0


def cap_tubes(
    tubes: Sequence[TubeRow], max_tubes: int
) -> tuple[list[TubeRow], Sequence[int | str] | None]:
    """The tubes with series of their own (the ``max_tubes`` with the most jobs, in
    their listing order) and the per-column sums of the others (None when none is left
    out)."""
    if len(tubes) <= max_tubes:
        return list(tubes), None

    def jobs(i: int) -> int:
        _name, _urgent, ready, reserved, delayed, buried, *_rest = tubes[i]
        return ready + reserved + delayed + buried

    # nlargest keeps the earlier tube on ties, so the same tubes are kept every scrape.
    keep = sorted(heapq.nlargest(max_tubes, range(len(tubes)), key=jobs))
    kept = set(keep)
    other = [0] * 14
    for i, row in enumerate(tubes):
        if i not in kept:
            for col in range(1, 6):
                other[col] += int(row[col])
    return [tubes[i] for i in keep], other


class MetricsBuilder:
    """Metric families filled from one or more servers' snapshots.

    ``extra_labels`` (e.g. ``("server",)``) come first on every series, with the values
    given to :meth:`add`.
    """

    def __init__(self, extra_labels: Sequence[str] = ()) -> None:
        lab = list(extra_labels)
        self._labels = lab
        self.jobs = GaugeMetricFamily(
            "beanpole_jobs", "Jobs by tube and state.", labels=[*lab, "tube", "state"]
        )
        self.commands = CounterMetricFamily(
            "beanpole_commands", "Commands received, by command.", labels=[*lab, "command"]
        )
        self.connections = GaugeMetricFamily(
            "beanpole_connections", "Open connections, by kind.", labels=[*lab, "kind"]
        )
        self.timeouts = CounterMetricFamily(
            "beanpole_job_timeouts", "Reservations whose time to run ran out.", labels=lab
        )
        self.uptime = GaugeMetricFamily(
            "beanpole_uptime_seconds", "Seconds since the server started.", labels=lab
        )
        self.draining = GaugeMetricFamily(
            "beanpole_draining", "1 while the server is in drain mode.", labels=lab
        )
        self.tubes = GaugeMetricFamily("beanpole_tubes", "Tubes that exist.", labels=lab)
        self.cpu = CounterMetricFamily(
            "beanpole_cpu_seconds", "CPU time of the server process.", labels=[*lab, "mode"]
        )
        self.binlog_oldest = GaugeMetricFamily(
            "beanpole_binlog_oldest_index", "Index of the oldest log file.", labels=lab
        )
        self.binlog_current = GaugeMetricFamily(
            "beanpole_binlog_current_index", "Index of the log file written now.", labels=lab
        )
        self.binlog_migrated = CounterMetricFamily(
            "beanpole_binlog_records_migrated", "Log records moved by compaction.", labels=lab
        )
        self.binlog_written = CounterMetricFamily(
            "beanpole_binlog_records_written", "Log records written.", labels=lab
        )
        self.binlog_max_size = GaugeMetricFamily(
            "beanpole_binlog_max_size_bytes", "Size of each log file.", labels=lab
        )
        self.binlog_failing = GaugeMetricFamily(
            "beanpole_binlog_failing",
            "1 while log writes or syncs fail (puts are refused).",
            labels=lab,
        )
        self.binlog_errors = CounterMetricFamily(
            "beanpole_binlog_errors", "Log write and sync errors seen.", labels=lab
        )
        self.hooks_dropped = CounterMetricFamily(
            "beanpole_hook_events_dropped",
            "Hook events dropped because the hook queue was full.",
            labels=lab,
        )
        self.build_info = GaugeMetricFamily(
            "beanpole_build_info",
            "Always 1; the label names beanpole's version (an embedded server only: the"
            " wire stats' version is the protocol's).",
            labels=[*lab, "version"],
        )
        self.up = GaugeMetricFamily(
            "beanpole_up", "1 if the server answered the last scrape.", labels=lab
        )
        # The HTTP endpoint's own figures: one endpoint, so no server label.
        self.http_open = GaugeMetricFamily(
            "beanpole_http_connections", "Open connections to the HTTP endpoint."
        )
        self.http_refused = CounterMetricFamily(
            "beanpole_http_connections_refused",
            "HTTP connections closed at once: the endpoint held --http-max-connections "
            "busy or new ones.",
        )
        self.http_evicted = CounterMetricFamily(
            "beanpole_http_connections_evicted",
            "Slow HTTP connections (a request unfinished, idle, or a reply not taken) "
            "closed at the connection cap to let a new one in.",
        )
        self.http_timeouts = CounterMetricFamily(
            "beanpole_http_request_timeouts",
            "HTTP connections closed because a request (or a TLS handshake) did not "
            "arrive in time, or a reply was not taken in time.",
        )

    def add(
        self,
        stats: Mapping[str, StatValue],
        tubes: Sequence[TubeRow],
        *,
        max_tubes: int,
        label_values: Sequence[str] = (),
        hook_events_dropped: int | None = None,
        other: TubeRow | None = None,
    ) -> None:
        """Add one server's figures. ``other``: the tubes beyond the cap, already summed
        (``tubes`` is then taken as already capped)."""
        lv = list(label_values)
        kept, others = (list(tubes), other) if other is not None else cap_tubes(tubes, max_tubes)
        add_job = self.jobs.add_metric
        for row in kept:
            for state, col in _STATES:
                add_job([*lv, row[0], state], float(row[col]))
        if others is not None:
            for state, col in _STATES:
                add_job([*lv, OTHER_TUBE, state], float(others[col]))
        for key in stats:
            if key.startswith("cmd-"):
                self.commands.add_metric([*lv, key[4:]], _num(stats, key))
        for kind, key in _CONNECTIONS:
            self.connections.add_metric([*lv, kind], _num(stats, key))
        self.timeouts.add_metric(lv, _num(stats, "job-timeouts"))
        self.uptime.add_metric(lv, _num(stats, "uptime"))
        self.draining.add_metric(lv, _num(stats, "draining"))
        self.tubes.add_metric(lv, _num(stats, "current-tubes"))
        self.cpu.add_metric([*lv, "user"], _num(stats, "rusage-utime"))
        self.cpu.add_metric([*lv, "system"], _num(stats, "rusage-stime"))
        self.binlog_oldest.add_metric(lv, _num(stats, "binlog-oldest-index"))
        self.binlog_current.add_metric(lv, _num(stats, "binlog-current-index"))
        self.binlog_migrated.add_metric(lv, _num(stats, "binlog-records-migrated"))
        self.binlog_written.add_metric(lv, _num(stats, "binlog-records-written"))
        self.binlog_max_size.add_metric(lv, _num(stats, "binlog-max-size"))
        if "log-failing" in stats:
            self.binlog_failing.add_metric(lv, _num(stats, "log-failing"))
            self.binlog_errors.add_metric(lv, _num(stats, "log-errors"))
        own_version = stats.get("beanpole-version")
        if isinstance(own_version, str):
            self.build_info.add_metric([*lv, own_version], 1.0)
        if hook_events_dropped is not None:
            self.hooks_dropped.add_metric(lv, float(hook_events_dropped))

    def add_http(self, open_now: int, refused: int, evicted: int, timed_out: int) -> None:
        """The HTTP endpoint's connections: open now, refused, evicted, timed out."""
        self.http_open.add_metric([], float(open_now))
        self.http_refused.add_metric([], float(refused))
        self.http_evicted.add_metric([], float(evicted))
        self.http_timeouts.add_metric([], float(timed_out))

    def add_up(self, up: bool, label_values: Sequence[str] = ()) -> None:
        self.up.add_metric(list(label_values), 1.0 if up else 0.0)

    def families(self) -> Iterator[Metric]:
        """Every family that has samples."""
        for value in vars(self).values():
            if isinstance(value, Metric) and value.samples:
                yield value


class SnapshotCollector(Collector):
    """A collector that calls ``collect_into(builder)`` once per scrape."""

    def __init__(
        self,
        collect_into: Callable[[MetricsBuilder], None],
        extra_labels: Sequence[str] = (),
    ) -> None:
        self._collect_into = collect_into
        self._extra_labels = tuple(extra_labels)

    def collect(self) -> Iterable[Metric]:
        builder = MetricsBuilder(self._extra_labels)
        self._collect_into(builder)
        return list(builder.families())


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """A registry holding only ``collectors`` (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry
