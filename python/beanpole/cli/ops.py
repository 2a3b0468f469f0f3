"""The operator's commands: ``beanpole stats``, ``beanpole top`` and ``beanpole exporter``.

All three talk the beanstalkd protocol over a socket (:mod:`beanpole.client.stats`), so they
work against any beanstalkd-protocol server, beanpole or stock beanstalkd. Errors (an
unreachable server, a missing tube or job) are one line on stderr and exit status 1.

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from beanpole.cli.tls import tls_client_options
from beanpole.client.stats import Stats, StatsClient, StatsError
from beanpole.config import Config, env_var, help_text

if TYPE_CHECKING:
    from beanpole.client.tls import TLSOptions
    from beanpole.ops.metrics import MetricsBuilder

__all__ = ["exporter", "stats", "top"]

_HOST_ENV: Final = "BEANPOLE_HOST"
_DEFAULT_HOST: Final = "127.0.0.1:11300"
_FORMATS: Final = ("table", "json", "yaml", "prometheus")
_DEFAULT_MAX_TUBES: Final = Config().metrics_max_tubes
_DEFAULT_HTTP_CONNECTIONS: Final = Config().http_max_connections
_FILE: Final = click.Path(exists=True, dir_okay=False)
_F = TypeVar("_F", bound=Callable[..., Any])

_host_option = click.option(
    "-H",
    "--host",
    envvar=_HOST_ENV,
    default=_DEFAULT_HOST,
    metavar="HOST:PORT|unix:PATH",
    help=f"Server to ask (beanpole or beanstalkd).  [default: {_DEFAULT_HOST}; env: {_HOST_ENV}]",
)


def _client(host: str, tls: TLSOptions | None = None) -> StatsClient:
    try:
        if tls is None:
            return StatsClient(host)
        return StatsClient(host, ssl_context=tls.ssl_context(), server_name=tls.server_name)
    except StatsError as err:
        raise click.BadParameter(str(err), param_hint="'-H' / '--host'") from None


def _console() -> Any:
    from rich.console import Console

    # Not a terminal (a pipe, a file): wide enough that tables are not squeezed.
    return Console(width=None if sys.stdout.isatty() else 200)


@click.command()
@_host_option
@tls_client_options
@click.option(
    "--tube", "tube_names", multiple=True, metavar="NAME", help="Stats of this tube (repeatable)."
)
@click.option("--tubes", "all_tubes", is_flag=True, help="One row per tube, every tube.")
@click.option(
    "--job", "job_id", type=click.IntRange(min=0), metavar="ID", help="Stats of this job."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_FORMATS),
    default="table",
    show_default=True,
    help="Output format.",
)
def stats(
    host: str,
    tls: TLSOptions | None,
    tube_names: Sequence[str],
    all_tubes: bool,
    job_id: int | None,
    fmt: str,
) -> None:
    """Show a server's stats: server-wide by default, or of tubes or a job."""
    from beanpole.ops import stats as fmt_stats

    if job_id is not None and (tube_names or all_tubes):
        raise click.UsageError("--job cannot be combined with --tube or --tubes")
    if job_id is not None and fmt == "prometheus":
        raise click.UsageError("--format prometheus shows server and tube stats, not a job")
    try:
        with _client(host, tls) as client:
            if job_id is not None:
                data: Stats | list[Stats] = client.stats_job(job_id)
            elif fmt == "prometheus":
                server = client.stats()
                names = list(tube_names) if tube_names else client.list_tubes()
                tubes = _existing(client, names, strict=bool(tube_names))
                click.echo(fmt_stats.prometheus_text(server, tubes), nl=False)
                return
            elif tube_names or all_tubes:
                names = list(tube_names) if tube_names else client.list_tubes()
                data = _existing(client, names, strict=bool(tube_names))
            else:
                data = client.stats()
    except StatsError as err:
        raise click.ClickException(str(err)) from None
    if fmt == "json":
        click.echo(fmt_stats.to_json(data))
    elif fmt == "yaml":
        click.echo(fmt_stats.to_yaml(data), nl=False)
    elif isinstance(data, list) and len(data) > fmt_stats.RICH_ROWS_MAX:
        click.echo(fmt_stats.plain_tubes_table(data), nl=False)
    elif isinstance(data, list):
        _console().print(fmt_stats.tubes_table(data))
    else:
        title = f"job {job_id}" if job_id is not None else f"stats of {client.name}"
        _console().print(fmt_stats.kv_table(data, title=title))


def _existing(client: StatsClient, names: Sequence[str], *, strict: bool) -> list[Stats]:
    """The stats of ``names``; with ``strict`` a missing tube is an error (the others
    may have gone away since they were listed)."""
    out: list[Stats] = []
    for name, found in zip(names, client.stats_tubes(names), strict=True):
        if found is not None:
            out.append(found)
        elif strict:
            raise StatsError(f"no tube named {name!r} on {client.name}")
    return out


@click.command()
@_host_option
@tls_client_options
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between refreshes.",
)
@click.option("--once", is_flag=True, help="Print one frame and exit.")
def top(host: str, tls: TLSOptions | None, interval: float, once: bool) -> None:
    """A live view of a server: jobs, connections, rates and the busiest tubes.

    Press q to quit.
    """
    from beanpole.ops import top as live

    client = _client(host, tls)
    try:
        if once:
            live.print_once(client, _console())
        else:
            live.run(client, interval)
    except StatsError as err:
        raise click.ClickException(str(err)) from None
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


def _token_file_option(flag: str, name: str) -> Callable[[_F], _F]:
    """A token file option of the exporter: the setting ``name`` of ``beanpole serve``,
    with its help text and its environment variable."""
    return click.option(
        flag,
        envvar=env_var(name),
        metavar="FILE",
        help=f"{help_text(name)}  [env: {env_var(name)}]",
    )


@click.command()
@click.option(
    "--target",
    "targets",
    multiple=True,
    required=True,
    metavar="HOST:PORT",
    help="A beanstalkd-protocol server to export (repeatable; unix:PATH works too).",
)
@click.option(
    "--http",
    "http",
    required=True,
    metavar="[tls:][HOST:]PORT",
    help="Serve /metrics and the dashboard here; loopback when no host is given; "
    "tls: serves HTTPS with --tls-cert and --tls-key.",
)
@click.option(
    "--metrics-max-tubes",
    type=click.IntRange(min=0),
    default=_DEFAULT_MAX_TUBES,
    show_default=True,
    metavar="N",
    help=help_text("metrics_max_tubes"),
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="How long a scrape waits for each server.",
)
@_token_file_option("--admin-token-file", "admin_token_file")
@_token_file_option("--http-read-token-file", "http_read_token_file")
@click.option(
    "--http-allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="HOST",
    help=help_text("http_allowed_host").replace(" (repeatable; the variable takes a "
                                               "comma-separated list)", " (repeatable)"),
)
@click.option(
    "--http-max-connections",
    type=click.IntRange(min=1),
    default=_DEFAULT_HTTP_CONNECTIONS,
    show_default=True,
    metavar="N",
    help=help_text("http_max_connections"),
)
@click.option("--tls-cert", type=_FILE, metavar="FILE", help="Certificate (PEM) of --http tls:.")
@click.option("--tls-key", type=_FILE, metavar="FILE", help="Key (PEM) of --tls-cert.")
@click.option(
    "--tls-client-ca",
    type=_FILE,
    metavar="FILE",
    help="CA certificates (PEM): only HTTPS clients with a certificate they signed get in.",
)
def exporter(
    targets: Sequence[str],
    http: str,
    metrics_max_tubes: int,
    timeout: float,
    admin_token_file: str | None,
    http_read_token_file: str | None,
    allowed_hosts: tuple[str, ...],
    http_max_connections: int,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
) -> None:
    """Serve Prometheus metrics and the web dashboard of beanstalkd-protocol servers.

    The metric names are those of `beanpole serve --http` (with a label `server`), so
    the same dashboards and alerts work for stock beanstalkd; the page at / shows the
    servers, with a selector when there are several. Runs until SIGTERM or SIGINT.
    """
    from beanpole import logs
    from beanpole.addr import describe, is_tls_http, parse_server
    from beanpole.ops.dashboard import Dashboard, RemoteSource, TokenError, load_token
    from beanpole.ops.http import Counters, HttpServer, metrics_route, ssl_context_of

    try:
        addresses = [parse_server(t) for t in targets]
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'--target'") from None
    labelled = [(describe(a), a) for a in addresses]
    if len(set(label for label, _a in labelled)) < len(labelled):
        raise click.BadParameter("a server is given twice", param_hint="'--target'")
    try:
        token = None if admin_token_file is None else load_token(admin_token_file)
    except TokenError as err:
        raise click.BadParameter(str(err), param_hint="'--admin-token-file'") from None
    try:
        read_token = (
            None
            if http_read_token_file is None
            else load_token(http_read_token_file, "read token")
        )
    except TokenError as err:
        raise click.BadParameter(str(err), param_hint="'--http-read-token-file'") from None
    context = None
    if is_tls_http(http):
        if tls_cert is None or tls_key is None:
            raise click.UsageError(f"--http {http} needs --tls-cert and --tls-key")
        try:
            context = ssl_context_of(tls_cert, tls_key, tls_client_ca)
        except ValueError as err:
            raise click.ClickException(str(err)) from None
    logs.setup(0, "text")  # the dashboard's actions are logged
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=min(8, len(labelled)), thread_name_prefix="scrape")

    def fetch(address: Any) -> Any:
        try:
            with StatsClient(address, timeout=timeout) as client:
                return client.snapshot()
        except StatsError:
            return None

    def collect_into(builder: MetricsBuilder) -> None:
        from beanpole.client.snapshot import row_of

        for (label, _a), result in zip(
            labelled, pool.map(fetch, [a for _l, a in labelled]), strict=True
        ):
            builder.add_up(result is not None, [label])
            if result is not None:
                server, tubes = result
                rows = [row_of(t) for t in tubes]
                builder.add(server, rows, max_tubes=metrics_max_tubes, label_values=[label])

    def healthz() -> tuple[int, str, bytes]:
        return 200, "text/plain; charset=utf-8", b"ok\n"

    dashboard = Dashboard(
        [RemoteSource(a, label, timeout) for label, a in labelled], token, read_token=read_token
    )
    counters = Counters()
    try:
        endpoint = HttpServer(
            http,
            {
                "/metrics": metrics_route(collect_into, ("server",), counters),
                "/healthz": healthz,
            },
            dashboard,
            allowed_hosts=[h.strip().lower().rstrip(".") for h in allowed_hosts],
            ssl_context=context,
            max_connections=http_max_connections,
            counters=counters,
        )
    except ValueError as err:
        dashboard.close()
        raise click.BadParameter(str(err), param_hint="'--http'") from None
    except OSError as err:
        dashboard.close()
        raise click.ClickException(f"cannot listen on {http}: {err.strerror or err}") from None
    host, port = endpoint.address
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    names = ", ".join(label for label, _ in labelled)
    scheme = endpoint.scheme
    # Handlers first: a stop asked for as soon as the lines are read is a clean stop.
    stop, restore = _stop_on_signals()
    click.echo(f"beanpole exporter: {scheme}://{shown}/metrics for {names}", err=True)
    click.echo(f"beanpole exporter: dashboard on {scheme}://{shown}/", err=True)
    sys.stderr.flush()
    try:
        stop.wait()
    finally:
        restore()
    endpoint.close()
    dashboard.close()
    pool.shutdown(wait=False, cancel_futures=True)


def _stop_on_signals() -> tuple[threading.Event, Callable[[], None]]:
    """An event SIGTERM and SIGINT set from now on, and what puts the old handlers back."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return stop, restore
