"""A cluster node with its HTTP endpoint: :class:`ServedNode` adds to a watched
:class:`beanpole.server.node.Node` what ``http`` in the settings asks for, as
:mod:`beanpole.ops.served` does for a single server: the endpoint of
:mod:`beanpole.ops.http` with

- ``/metrics``: the cluster's queue under the usual names, read through the node's
  own client address (:class:`~beanpole.ops.dashboard.node_source.NodeSource`), and
  the node's ``beanpole_cluster_*`` families (:mod:`beanpole.ops.cluster_metrics`);
- ``/healthz``: 200 while the node runs;
- ``/readyz``: 503 with the reason while :meth:`Node.not_ready` gives one;
- the dashboard, with the cluster panel (``/api/cluster``).

Imports ``beanpole.server`` and the rest of ``beanpole.ops``; nothing of
``beanpole.cli``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from beanpole.server.embedded import ServerError
from beanpole.server.node import Node

if TYPE_CHECKING:
    from beanpole import _core
    from beanpole.config import Config
    from beanpole.ops.dashboard import Dashboard
    from beanpole.ops.dashboard.node_source import NodeSource
    from beanpole.ops.http import HttpServer

__all__ = ["ServedNode"]

_TEXT = "text/plain; charset=utf-8"


class ServedNode(Node):
    """:class:`~beanpole.server.node.Node` ``native`` with the HTTP endpoint and the
    dashboard on ``config.http`` (none when it is None); the other HTTP settings
    (tokens, allowed hosts, the connection cap, TLS for ``tls:``, the per-tube cap of
    the metrics) come from ``config`` too. ``watch`` goes to :class:`Node`."""

    def __init__(
        self,
        native: _core.ClusterNode,
        cluster_file: str | os.PathLike[str],
        config: Config,
        **watch: Any,
    ) -> None:
        super().__init__(native, cluster_file, hook_queue=config.hook_queue, **watch)
        self.config = config
        self._http: HttpServer | None = None
        self._dashboard: Dashboard | None = None
        self._metrics_source: NodeSource | None = None

    @property
    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the HTTP endpoint listens on, or None without ``http``."""
        http = self._http
        return None if http is None else http.address

    def dashboard(self) -> Dashboard | None:
        return self._dashboard

    def start(self) -> None:
        """Serve HTTP (when asked), then watch. Raises :class:`ServerError` or
        :class:`OSError` naming the address when the endpoint cannot start (nothing
        of it is left running)."""
        address = self.config.http
        if address is not None:
            self._start_http(address)
        super().start()

    def _start_http(self, address: str) -> None:
        from beanpole.ops.cluster_metrics import NodeCollector, queue_collector
        from beanpole.ops.dashboard import Dashboard
        from beanpole.ops.dashboard.node_source import NodeSource
        from beanpole.ops.http import Counters, Response, endpoint, metrics_route, readyz_route
        from beanpole.ops.served import read_tokens

        admin, read = read_tokens(self.config)
        source = NodeSource(self)
        metrics_source = NodeSource(self)  # its own connection: a scrape never waits
        dashboard = Dashboard([source], admin, read_token=read, cluster=self.view)
        counters = Counters()

        def healthz() -> Response:
            if self.status()["role"] == "down":
                return 503, _TEXT, b"stopped\n"
            return 200, _TEXT, b"ok\n"

        routes = {
            "/metrics": metrics_route(
                queue_collector(metrics_source, self.config.metrics_max_tubes),
                counters=counters,
                extra=NodeCollector(self),
            ),
            "/healthz": healthz,
            "/readyz": readyz_route(self.not_ready),
        }
        try:
            self._http = endpoint(self.config, address, routes, dashboard, counters)
        except (OSError, ValueError) as err:
            dashboard.close()
            metrics_source.close()
            if isinstance(err, ValueError):
                raise ServerError(f"cannot serve HTTP on {address}: {err}") from None
            reason = err.strerror or str(err)
            raise OSError(err.errno, f"cannot serve HTTP on {address}: {reason}") from None
        self._dashboard = dashboard
        self._metrics_source = metrics_source

    def _stop_http(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()
        dashboard, self._dashboard = self._dashboard, None
        if dashboard is not None:
            dashboard.close()
        source, self._metrics_source = self._metrics_source, None
        if source is not None:
            source.close()

    def close(self) -> None:
        self._stop_http()
        super().close()

    def stop(self) -> None:
        self._stop_http()
        super().stop()
