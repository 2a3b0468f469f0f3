"""The HTTP endpoint: ``/metrics`` (Prometheus text format), ``/healthz``, ``/readyz``
and the web dashboard (``/`` and ``/api/...``, see :mod:`beanpole.ops.dashboard`), over
HTTP or, with ``tls:HOST:PORT``, HTTPS.

A :class:`HttpServer` serves a table of routes and, for every other path, an optional
:data:`App` (the dashboard); it serves an embedded server (``beanpole serve --http``,
started and stopped by :class:`beanpole.Server`) and ``beanpole exporter``.

Its threads are fixed, whatever the clients do: one connection loop
(:mod:`beanpole.ops.http_loop`: accepting, reading requests and writing replies for every
connection, with a cap on connections and deadlines), :data:`ROUTE_WORKERS` threads
for the routes and :data:`APP_WORKERS` for the dashboard, so a slow dashboard view
never holds up a scrape or a health check. The listen backlog
(:data:`BACKLOG`) takes a burst of connections without SYN retries.

Ops layer: imports the server, the clients and the settings at most; nothing of
``beanpole.cli`` or ``.spark``.
"""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Final, TypeAlias

from beanpole.addr import is_tls_http, parse_http
from beanpole.ops.http_loop import Conn, Counters, Loop, serve
from beanpole.ops.http_wire import (
    MAX_REQUEST_BODY,
    Head,
    Reply,
    Request,
    encode,
    error_reply,
)

if TYPE_CHECKING:
    import ssl

    from prometheus_client.registry import Collector

    from beanpole.config import Config
    from beanpole.ops.metrics import MetricsBuilder
    from beanpole.server.embedded import Server

__all__ = [
    "APP_WORKERS",
    "BACKLOG",
    "DEFAULT_MAX_CONNECTIONS",
    "HEAD_TIMEOUT",
    "MAX_REQUEST_BODY",
    "ROUTE_WORKERS",
    "App",
    "Counters",
    "HttpServer",
    "Reply",
    "Request",
    "Response",
    "collector_of",
    "endpoint",
    "metrics_route",
    "readyz_route",
    "serve_http",
    "ssl_context_of",
]

#: status, content type, body
Response: TypeAlias = tuple[int, str, bytes]
Route: TypeAlias = Callable[[], Response]
_TEXT: Final = "text/plain; charset=utf-8"
#: Connections served at once unless told otherwise (``--http-max-connections``).
DEFAULT_MAX_CONNECTIONS: Final = 64
#: Seconds a client has for a request's head and body (and a TLS handshake before).
HEAD_TIMEOUT: Final = 5.0
#: The listening socket's backlog: a burst of this many connections waits to be
#: accepted instead of being dropped (and retried by the client a second later).
BACKLOG: Final = 1024
ROUTE_WORKERS: Final = 2
APP_WORKERS: Final = 4

#: Serves the paths that are not routes (None: not its path, 404).
App: TypeAlias = Callable[[Request], Reply | None]
_Job: TypeAlias = tuple[Conn, Head, bytes]


class HttpServer:
    """Serves ``routes`` (path -> function giving a :data:`Response`, for GET and
    HEAD) and, for other paths, ``app`` on ``address`` (``[HOST:]PORT``, or
    ``tls:HOST:PORT`` with ``ssl_context``) until :meth:`close`.

    Requests whose ``Host`` is not ``localhost``, the address the connection came in
    on, the host of ``address`` or one of ``allowed_hosts`` are answered 421.
    ``tls_files`` (certificate, key, client CA) are what :meth:`reload_tls` reads.
    """

    def __init__(
        self,
        address: str,
        routes: Mapping[str, Route],
        app: App | None = None,
        *,
        allowed_hosts: Collection[str] = (),
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        head_timeout: float = HEAD_TIMEOUT,
        counters: Counters | None = None,
        tls_files: tuple[str, str, str | None] | None = None,
    ) -> None:
        tls = is_tls_http(address)
        host, port = parse_http(address)
        if tls and ssl_context is None:
            raise ValueError(f"{address} needs a certificate and a key (--tls-cert, --tls-key)")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        listener = _listen(host, port)
        bound = listener.getsockname()
        self.address: tuple[str, int] = (str(bound[0]), int(bound[1]))
        self.scheme = "https" if tls else "http"
        self._routes = dict(routes)
        self._app = app
        self._tls_files = tls_files if tls else None
        self._loop = Loop(
            listener,
            self._dispatch,
            max_connections=max_connections,
            head_timeout=head_timeout,
            allowed_hosts={host, *allowed_hosts},
            ssl_context=ssl_context if tls else None,
            counters=counters,
        )
        self.counters = self._loop.counters
        self._listener = listener
        # Unbounded, yet never long: a connection has at most one request in work, and
        # the loop holds at most max_connections connections.
        self._route_jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._app_jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        name = f"beanpole-http-{self.address[1]}"
        self._threads = [
            threading.Thread(
                target=self._work, args=(jobs,), name=f"{name}-{kind}{i}", daemon=True
            )
            for jobs, kind, count in (
                (self._route_jobs, "route", ROUTE_WORKERS),
                (self._app_jobs, "app", APP_WORKERS),
            )
            for i in range(count)
        ]
        for thread in self._threads:
            thread.start()
        self._threads.append(serve(self._loop, name))
        self._closed = False

    def close(self) -> None:
        """Stop serving and release the socket; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        self._loop.stop()
        for _ in range(ROUTE_WORKERS):
            self._route_jobs.put(None)
        for _ in range(APP_WORKERS):
            self._app_jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._listener.close()

    def reload_tls(self) -> bool:
        """Read the certificate files again for connections accepted from now on;
        False when the endpoint has none to read. Raises :class:`OSError` when they
        cannot be used (the context in force is kept)."""
        if self._tls_files is None:
            return False
        try:
            context = ssl_context_of(*self._tls_files)
        except ValueError as err:
            raise OSError(str(err)) from None
        self._loop.use_ssl_context(context)
        return True

    def _dispatch(self, conn: Conn, head: Head, body: bytes) -> None:
        path = head.target.partition("?")[0]
        routed = head.method in ("GET", "HEAD") and path in self._routes
        (self._route_jobs if routed else self._app_jobs).put((conn, head, body))

    def _work(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        while (job := jobs.get()) is not None:
            conn, head, body = job
            close = not head.keep_alive
            try:
                reply = self._answer(conn, head, body)
                data = encode(reply, head_only=head.method == "HEAD", close=close)
            except Exception as err:  # every request is answered: none is left in work
                failed = error_reply(500, str(err) or type(err).__name__)
                data = encode(failed, head_only=head.method == "HEAD", close=True)
                close = True
            self._loop.finish(conn, data, close)

    def _answer(self, conn: Conn, head: Head, body: bytes) -> Reply:
        path, _sep, query = head.target.partition("?")
        route = self._routes.get(path) if head.method in ("GET", "HEAD") else None
        if route is not None:
            try:
                status, ctype, content = route()
            except Exception as err:  # a failing scrape is answered, never fatal
                return error_reply(500, str(err) or type(err).__name__)
            return Reply(status, ctype, content)
        reply = None
        if self._app is not None:
            request = Request(head.method, path, query, head.headers, body, conn.client)
            try:
                reply = self._app(request)
            except Exception as err:  # answered, never fatal to the endpoint
                reply = error_reply(500, str(err) or type(err).__name__)
        return error_reply(404, "not found") if reply is None else reply


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` with a backlog of :data:`BACKLOG`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(BACKLOG)
    except OSError:
        listener.close()
        raise
    return listener


def ssl_context_of(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side TLS context for ``tls:`` HTTP: ``cert`` and ``key`` (PEM), and with
    ``client_ca`` only clients with a certificate it signed get in. Raises
    :class:`ValueError` with one line when a file cannot be used."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        reason = getattr(err, "strerror", None) or getattr(err, "reason", None) or err
        raise ValueError(f"cannot use --tls-cert {cert} with --tls-key {key}: {reason}") from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except (OSError, ssl.SSLError) as err:
            reason = getattr(err, "strerror", None) or getattr(err, "reason", None) or err
            raise ValueError(f"cannot use --tls-client-ca {client_ca}: {reason}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def metrics_route(
    collect_into: Callable[[MetricsBuilder], None],
    labels: tuple[str, ...] = (),
    counters: Counters | None = None,
    extra: Collector | None = None,
) -> Route:
    """A ``/metrics`` route filled by ``collect_into`` once per scrape, with the
    endpoint's own ``counters`` (connections open, refused, evicted, timed out) and
    the families of ``extra`` (a cluster node's)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from beanpole.ops.metrics import SnapshotCollector, registry_of

    def collect(builder: MetricsBuilder) -> None:
        collect_into(builder)
        if counters is not None:
            builder.add_http(counters.open, counters.refused, counters.evicted, counters.timed_out)

    collectors: list[Collector] = [SnapshotCollector(collect, labels)]
    if extra is not None:
        collectors.append(extra)
    registry = registry_of(*collectors)

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
    ``app`` (the dashboard) for the other paths; the HTTP settings (allowed hosts,
    connection cap, certificates for ``tls:``) come from the server's config."""
    counters = Counters()

    def healthz() -> Response:
        if server.running:
            return 200, _TEXT, b"ok\n"
        return 503, _TEXT, b"stopped\n"

    metrics = metrics_route(collector_of(server), counters=counters)
    readyz = readyz_route(lambda: _not_ready(server))
    routes = {"/metrics": metrics, "/healthz": healthz, "/readyz": readyz}
    return endpoint(server.config, address, routes, app, counters)


def readyz_route(not_ready: Callable[[], str | None]) -> Route:
    """``/readyz``: 200 ``ready``, or 503 ``not ready: REASON`` while ``not_ready``
    gives a reason."""

    def readyz() -> Response:
        reason = not_ready()
        if reason is None:
            return 200, _TEXT, b"ready\n"
        return 503, _TEXT, f"not ready: {reason}\n".encode()

    return readyz


def endpoint(
    config: Config,
    address: str,
    routes: Mapping[str, Route],
    app: App | None,
    counters: Counters,
) -> HttpServer:
    """An :class:`HttpServer` for ``routes`` and ``app`` on ``address`` with the HTTP
    settings of ``config``: allowed hosts, the connection cap, and for ``tls:`` the
    certificate, key and client CA."""
    context = None
    if is_tls_http(address):
        if config.tls_cert is None or config.tls_key is None:
            raise ValueError(f"{address} needs --tls-cert and --tls-key")
        context = ssl_context_of(config.tls_cert, config.tls_key, config.tls_client_ca)
    return HttpServer(
        address,
        routes,
        app,
        allowed_hosts=config.http_allowed_host,
        ssl_context=context,
        max_connections=config.http_max_connections,
        counters=counters,
        tls_files=(
            None
            if context is None or config.tls_cert is None or config.tls_key is None
            else (config.tls_cert, config.tls_key, config.tls_client_ca)
        ),
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
