"""The HTTP endpoint: ``/metrics`` (Prometheus text format), ``/healthz``, ``/readyz``
and the web dashboard (``/`` and ``/api/...``, see :mod:`beanpole.dashboard`).

A :class:`HttpServer` is a standard-library threading HTTP server on a daemon thread
with a table of routes and, for every other path, an optional :data:`App` (the
dashboard); it serves an embedded server (``beanpole serve --http``, started and stopped
by :class:`beanpole.Server`) and ``beanpole exporter``. Each request runs on a thread of
its own, so a slow scrape does not hold up a health check.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from beanpole.addr import parse_http

if TYPE_CHECKING:
    from beanpole.metrics import MetricsBuilder
    from beanpole.server import Server

__all__ = [
    "App",
    "HttpServer",
    "Reply",
    "Request",
    "Response",
    "collector_of",
    "metrics_route",
    "serve_http",
]

#: status, content type, body
Response: TypeAlias = tuple[int, str, bytes]
Route: TypeAlias = Callable[[], Response]
_TEXT: Final = "text/plain; charset=utf-8"
#: The largest request body read (the dashboard's actions are a few bytes of JSON).
MAX_REQUEST_BODY: Final = 64 * 1024


@dataclass(frozen=True)
class Request:
    """A request handed to an :data:`App`: ``path`` without the query, still
    percent-encoded (so a tube name holding ``/`` stays one segment)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    client: str


@dataclass(frozen=True)
class Reply:
    """What an :data:`App` answers: a :data:`Response` and extra headers."""

    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


#: Serves the paths that are not routes, GET and POST (None: not its path, 404).
App: TypeAlias = Callable[[Request], Reply | None]


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
            self._to_app(b"")
            return
        try:
            status, ctype, body = route()
        except Exception as err:  # a failing scrape is answered, never fatal
            status, ctype, body = 500, _TEXT, f"error: {err}\n".encode()
        self._send(Reply(status, ctype, body))

    def do_HEAD(self) -> None:
        self.do_GET()  # the same answer without its body (see _send)

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REQUEST_BODY:
            self.close_connection = True
            self._send(Reply(413, _TEXT, b"request body too large\n"))
            return
        self._to_app(self.rfile.read(length))

    def _to_app(self, body: bytes) -> None:
        app = self.server.app
        path, _sep, query = self.path.partition("?")
        reply = None
        if app is not None:
            request = Request(
                self.command,
                path,
                query,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                str(self.client_address[0]),
            )
            try:
                reply = app(request)
            except Exception as err:  # answered, never fatal to the endpoint
                reply = Reply(500, _TEXT, f"error: {err}\n".encode())
        if reply is None:
            reply = Reply(404, _TEXT, b"not found\n")
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are not logged


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    routes: Mapping[str, Route]
    app: App | None = None

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
    """Serves ``routes`` (path -> function giving a :data:`Response`) and, for other
    paths, ``app`` on ``address`` (``[HOST:]PORT``) from a daemon thread, until
    :meth:`close`."""

    def __init__(
        self, address: str, routes: Mapping[str, Route], app: App | None = None
    ) -> None:
        host, port = parse_http(address)
        cls = _Listener6 if ":" in host else _Listener
        listener = cls((host, port), _Handler)
        listener.routes = routes
        listener.app = app
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


def serve_http(server: Server, address: str, app: App | None = None) -> HttpServer:
    """The endpoint of an embedded server: its metrics, health and readiness, and
    ``app`` (the dashboard) for the other paths."""

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
        app,
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
