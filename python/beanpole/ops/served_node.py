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

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from beanpole.server.embedded import ServerError
from beanpole.server.node import Node

if TYPE_CHECKING:
    from beanpole import _core
    from beanpole.config import Config
    from beanpole.ops.dashboard import Dashboard
    from beanpole.ops.dashboard.node_source import NodeSource
    from beanpole.ops.http import Counters, HttpServer, Reply, Request, Response

__all__ = ["ServedNode"]

_TEXT = "text/plain; charset=utf-8"


class ServedNode(Node):
    """A :class:`~beanpole.server.node.Node` with the HTTP endpoint and the dashboard
    on ``config.http`` (none when it is None), opened by :meth:`listen` before the
    native node starts (so a port in use stops the start before the node runs); the
    other HTTP settings (tokens, allowed hosts, the connection cap, TLS for ``tls:``,
    the per-tube cap of the metrics) come from ``config`` too. ``watch`` goes to
    :class:`Node`."""

    def __init__(
        self,
        cluster_file: str | os.PathLike[str],
        node_id: int,
        config: Config,
        **watch: Any,
    ) -> None:
        super().__init__(cluster_file, node_id, hook_queue=config.hook_queue, **watch)
        self.config = config
        self._http: HttpServer | None = None
        self._dashboard: Dashboard | None = None
        self._metrics_source: NodeSource | None = None
        self._metrics_route: Callable[[], Response] | None = None
        self._tokens: tuple[bytes | None, bytes | None] = (None, None)
        self._counters: Counters | None = None

    @property
    def http_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the HTTP endpoint listens on, or None without ``http``."""
        http = self._http
        return None if http is None else http.address

    def dashboard(self) -> Dashboard | None:
        return self._dashboard

    def listen(self) -> None:
        """Serve HTTP when ``http`` is set; until :meth:`start` every path but
        ``/readyz`` answers 503 ``starting``. Raises :class:`ServerError` or
        :class:`OSError` naming the address when the endpoint cannot start, or a token
        file cannot be read (nothing of it is left running)."""
        address = self.config.http
        if address is None or self._http is not None:
            return
        from beanpole.ops.http import Counters, endpoint, readyz_route
        from beanpole.ops.served import read_tokens

        self._tokens = read_tokens(self.config)
        self._counters = counters = Counters()
        routes = {
            "/metrics": self._metrics,
            "/healthz": self._healthz,
            "/readyz": readyz_route(self.not_ready),
        }
        try:
            self._http = endpoint(self.config, address, routes, self._app, counters)
        except ValueError as err:
            raise ServerError(f"cannot serve HTTP on {address}: {err}") from None
        except OSError as err:
            reason = err.strerror or str(err)
            raise OSError(err.errno, f"cannot serve HTTP on {address}: {reason}") from None

    def start(self, native: _core.ClusterNode) -> None:
        super().start(native)
        if self._http is None:
            return
        from beanpole.ops.cluster_metrics import NodeCollector, queue_collector
        from beanpole.ops.dashboard import Dashboard
        from beanpole.ops.dashboard.node_source import NodeSource
        from beanpole.ops.http import metrics_route

        admin, read = self._tokens
        self._metrics_source = source = NodeSource(self)  # its own connection
        self._metrics_route = metrics_route(
            queue_collector(source, self.config.metrics_max_tubes),
            counters=self._counters,
            extra=NodeCollector(self),
        )
        self._dashboard = Dashboard([NodeSource(self)], admin, read_token=read, cluster=self.view)

    # -- the endpoint's answers ---------------------------------------------------------

    def _metrics(self) -> Response:
        route = self._metrics_route
        if route is None:
            return 503, _TEXT, b"starting\n"
        return route()

    def _healthz(self) -> Response:
        if self.native is None:
            return 503, _TEXT, b"starting\n"
        if self.status()["role"] == "down":
            return 503, _TEXT, b"stopped\n"
        return 200, _TEXT, b"ok\n"

    def _app(self, request: Request) -> Reply | None:
        dashboard = self._dashboard
        if dashboard is None:
            from beanpole.ops.http_wire import error_reply

            return error_reply(503, "starting")
        return dashboard(request)

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
