"""The HTTP endpoint: ``/metrics`` (Prometheus text format), ``/healthz`` and ``/readyz``.

A :class:`HttpServer` is a standard-library threading HTTP server on a daemon thread
with a table of routes; it serves an embedded server (``beanpole serve --http``, started
and stopped by :class:`beanpole.Server`) and ``beanpole exporter``. Each request runs on a
thread of its own, so a slow scrape does not hold up a health check.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from beanpole.addr import parse_http

if TYPE_CHECKING:
    from beanpole.metrics import MetricsBuilder
    from beanpole.server import Server

__all__ = ["HttpServer", "Response", "collector_of", "metrics_route", "serve_http"]

#: status, content type, body
Response: TypeAlias = tuple[int, str, bytes]
Route: TypeAlias = Callable[[], Response]
_TEXT: Final = "text/plain; charset=utf-8"


class _Handler(BaseHTTPRequestHandler):
    server: _Listener
    protocol_version = "HTTP/1.1"
    #: An idle keep-alive connection is closed after this many seconds, so its thread
    #: does not outlive a stopped endpoint for long (scrapers reconnect as needed).
    timeout = 120

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        route = self.server.routes.get(path)
        if route is None:
            status, ctype, body = 404, _TEXT, b"not found\n"
        else:
            try:
                status, ctype, body = route()
            except Exception as err:  # a failing scrape is answered, never fatal
                status, ctype, body = 500, _TEXT, f"error: {err}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    routes: Mapping[str, Route]

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's fully qualified name, which can
        # wait on DNS; the name is only used for CGI variables, so skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Listener6(_Listener):
    address_family = socket.AF_INET6


class HttpServer:
    """Serves ``routes`` (path -> function giving a :data:`Response`) on ``address``
    (``[HOST:]PORT``) from a daemon thread, until :meth:`close`."""

    def __init__(self, address: str, routes: Mapping[str, Route]) -> None:
        host, port = parse_http(address)
        cls = _Listener6 if ":" in host else _Listener
        listener = cls((host, port), _Handler)
        listener.routes = routes
        self._listener = listener
        bound = listener.server_address
        self.address: tuple[str, int] = (str(bound[0]), int(bound[1]))
        self._thread = threading.Thread(
            target=listener.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"beanpole-http-{self.address[1]}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the socket; safe to call more than once."""
        if self._thread.is_alive():
            self._listener.shutdown()
            self._thread.join()
        self._listener.server_close()


def metrics_route(
    collect_into: Callable[[MetricsBuilder], None], labels: tuple[str, ...] = ()
) -> Route:
    """A ``/metrics`` route filled by ``collect_into`` once per scrape."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from beanpole.metrics import SnapshotCollector, registry_of

    registry = registry_of(SnapshotCollector(collect_into, labels))

    def route() -> Response:
        return 200, CONTENT_TYPE_LATEST, generate_latest(registry)

    return route


def collector_of(server: Server) -> Callable[[MetricsBuilder], None]:
    """What fills an embedded server's ``/metrics``: one capped snapshot per scrape."""

    def collect_into(builder: MetricsBuilder) -> None:
        max_tubes = server.config.metrics_max_tubes
        snap = server.snapshot(max_tubes)
        builder.add(
            snap.server,
            snap.tubes,
            max_tubes=max_tubes,
            other=snap.other,
            hook_events_dropped=int(getattr(server, "hook_events_dropped", 0)),
        )

    return collect_into


def serve_http(server: Server, address: str) -> HttpServer:
    """The endpoint of an embedded server: its metrics, health and readiness."""

    def healthz() -> Response:
        if server.running:
            return 200, _TEXT, b"ok\n"
        return 503, _TEXT, b"stopped\n"

    def readyz() -> Response:
        reason = _not_ready(server)
        if reason is None:
            return 200, _TEXT, b"ready\n"
        return 503, _TEXT, f"not ready: {reason}\n".encode()

    return HttpServer(
        address,
        {"/metrics": metrics_route(collector_of(server)), "/healthz": healthz, "/readyz": readyz},
    )


def _not_ready(server: Server) -> str | None:
    """Why the server does not take jobs now, or None if it does."""
    if not server.running:
        return "stopping"
    if server.draining:
        return "draining"
    try:
        failing = server.stats().get("log-failing", False)
    except Exception:  # stopped between the checks
        return "stopping"
    return "log failing (puts are refused)" if failing else None
