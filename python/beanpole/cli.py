"""The ``beanpole`` command.

``beanpole serve`` takes beanstalkd's flags (``-l -p -z -u -V -v``, and ``-b -f -F -s`` for
the write-ahead log) plus ``-c/--config``, ``--threads`` and ``--skip-corrupt``; every setting
can also come from a ``BEANPOLE_*`` environment variable or a TOML file. Defaults and
validation live in :mod:`beanpole.config`, never here.

Exit status: 0 after a clean stop, 2 for a usage error (unknown flag, malformed or
out-of-range flag value, ``-f`` with ``-F``), 1 with a one-line message for anything else
that prevents serving (address in use, bad environment variable or config file, unknown
user, a log directory that is locked, corrupt or holds beanstalkd binlog files).
"""

from __future__ import annotations

import logging
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click
from click.core import ParameterSource

from beanpole import logs, systemd
from beanpole.binlog import binlog
from beanpole.cli_admin import register as register_admin
from beanpole.cli_ops import register as register_ops
from beanpole.cli_ops import report_http
from beanpole.config import CONFIG_FILE_ENV, LOG_FORMATS, Config, ConfigError, env_var, help_text
from beanpole.hooks import HookError, load_hook
from beanpole.server import Server, ServerError

__all__ = ["cli", "main"]

_LOG = logging.getLogger(logs.LOGGER)

_CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}
_DEFAULTS = Config()

# Settings of ``serve`` that map one-to-one onto Config fields.
_SETTINGS = (
    "listen",
    "port",
    "unix_mode",
    "max_job_size",
    "user",
    "verbose",
    "threads",
    "binlog_dir",
    "fsync_ms",
    "no_fsync",
    "segment_size",
    "skip_corrupt",
    "hooks",
    "hook_queue",
    "log_format",
    "http",
    "metrics_max_tubes",
    "admin_token_file",
    "http_read_token_file",
    "http_allowed_host",
    "http_max_connections",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "max_connections",
    "max_memory",
)


def _version() -> str:
    try:
        from beanpole import __version__
    except ImportError as err:
        raise click.ClickException(f"beanpole's native module is not available: {err}") from None
    return __version__


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"beanpole {_version()}")
    ctx.exit()


def _help(name: str, default: str | None = None) -> str:
    """Help text of a Config field, with its default (read from Config) and its variable."""
    if default is None:
        value = getattr(_DEFAULTS, name)
        default = None if value is None or isinstance(value, bool) else str(value)
    extra = f"default: {default}; " if default is not None else ""
    return f"{help_text(name)}  [{extra}env: {env_var(name)}]"


def _format_address(address: tuple[str, int] | str) -> str:
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@click.group(name="beanpole", context_settings=_CONTEXT_SETTINGS)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """beanpole: a beanstalkd-compatible work-queue server."""


_SERVE_EPILOG = f"""\b
By default beanpole listens on {_DEFAULTS.listen[0]} (loopback only), so only
this machine can connect; beanstalkd listens on all interfaces by default.
Use -l 0.0.0.0 to listen on all IPv4 interfaces (or -l :: for IPv6).
-l can be given several times (-l 127.0.0.1 -l ::1 -l unix:/run/beanpole.sock);
-p is the port of the addresses given without one (127.0.0.1:11301, [::1]:11301).
BEANPOLE_LISTEN takes a comma-separated list, the TOML file a list.

\b
systemd: sockets passed by socket activation (LISTEN_FDS) are served instead
of the -l addresses; with NOTIFY_SOCKET set, READY=1 is sent once serving
and STOPPING=1 when stopping (Type=notify).

\b
Precedence: flag > BEANPOLE_* environment variable > --config file > default.
The TOML file holds the settings under [beanpole] (or at the top level) with
the field names: listen, port, unix_mode, max_job_size, user, verbose, threads,
binlog_dir, fsync_ms, no_fsync, segment_size, skip_corrupt, hooks, hook_queue,
log_format, http, metrics_max_tubes, admin_token_file, http_read_token_file,
http_allowed_host, http_max_connections, tls_cert, tls_key, tls_client_ca,
max_connections, max_memory.

\b
Write-ahead log: with -b DIR every change to the jobs is logged in DIR and
the jobs are back after a restart. -f 0 puts every change on disk before
its reply; -F never syncs. -f and -F cannot be used together.

\b
Signals: SIGTERM and SIGINT stop the server cleanly; SIGUSR1 enters drain
mode (every put is then answered DRAINING); SIGHUP re-reads the TLS
certificate files (open connections keep theirs).

\b
TLS: -l tls:0.0.0.0:11443 --tls-cert cert.pem --tls-key key.pem serves that
address with TLS beside the plain ones; --tls-client-ca ca.pem lets in only
clients with a certificate signed by that CA. --http tls:127.0.0.1:8443 serves
the HTTP endpoint over HTTPS with the same certificate (and the same client CA).

\b
HTTP endpoint: requests must name localhost, the address served, or a host
given with --http-allowed-host (421 otherwise); job bodies in the dashboard
need the read token (--http-read-token-file) or the admin token.
"""


@cli.command(epilog=_SERVE_EPILOG)
@click.option(
    "-l",
    "--listen",
    metavar="ADDR",
    multiple=True,
    help=_help("listen", f"{_DEFAULTS.listen[0]} (loopback only)"),
)
@click.option("-p", "--port", type=int, metavar="PORT", help=_help("port"))
@click.option("--unix-mode", metavar="MODE", help=_help("unix_mode"))
@click.option("-z", "--max-job-size", type=int, metavar="BYTES", help=_help("max_job_size"))
@click.option("-u", "--user", metavar="USER", help=_help("user"))
@click.option("-V", "--verbose", count=True, help=_help("verbose"))
@click.option(
    "-v",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
@click.option(
    "-c",
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help=f"Read settings from this TOML file.  [env: {CONFIG_FILE_ENV}]",
)
@click.option("--threads", type=int, metavar="N", help=_help("threads"))
@click.option(
    "-b",
    "--binlog-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help=_help("binlog_dir", "none (jobs live in memory only)"),
)
@click.option("-f", "--fsync-ms", type=int, metavar="MS", help=_help("fsync_ms"))
@click.option("-F", "--no-fsync", is_flag=True, help=_help("no_fsync"))
@click.option("-s", "--segment-size", type=int, metavar="BYTES", help=_help("segment_size"))
@click.option("--skip-corrupt", is_flag=True, help=_help("skip_corrupt"))
@click.option(
    "--hooks", multiple=True, metavar="MODULE:FUNCTION", help=_help("hooks", "none")
)
@click.option("--hook-queue", type=int, metavar="N", help=_help("hook_queue"))
@click.option("--log-format", type=click.Choice(LOG_FORMATS), help=_help("log_format"))
@click.option("--http", metavar="[tls:][HOST:]PORT", help=_help("http", "off"))
@click.option("--metrics-max-tubes", type=int, metavar="N", help=_help("metrics_max_tubes"))
@click.option("--admin-token-file", metavar="FILE", help=_help("admin_token_file", "none"))
@click.option(
    "--http-read-token-file", metavar="FILE", help=_help("http_read_token_file", "none")
)
@click.option(
    "--http-allowed-host", multiple=True, metavar="HOST", help=_help("http_allowed_host", "none")
)
@click.option(
    "--http-max-connections", type=int, metavar="N", help=_help("http_max_connections")
)
@click.option("--tls-cert", metavar="FILE", help=_help("tls_cert"))
@click.option("--tls-key", metavar="FILE", help=_help("tls_key"))
@click.option("--tls-client-ca", metavar="FILE", help=_help("tls_client_ca"))
@click.option("--max-connections", type=int, metavar="N", help=_help("max_connections"))
@click.option("--max-memory", type=int, metavar="BYTES", help=_help("max_memory"))
@click.pass_context
def serve(ctx: click.Context, /, config_file: str | None, **options: Any) -> None:
    """Run a server until SIGTERM or SIGINT."""
    flags = {
        name: options[name]
        for name in _SETTINGS
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    if "fsync_ms" in flags:
        if flags.get("no_fsync"):
            raise click.UsageError(
                "-f/--fsync-ms and -F/--no-fsync cannot be used together", ctx=ctx
            )
        # -f turns syncing on, as in beanstalkd, whatever the environment or file say.
        flags["no_fsync"] = False
    for name in ("hooks", "http_allowed_host"):
        if not flags.get(name, True):
            del flags[name]  # not given: click's empty tuple is no setting
    config = _load_config(ctx, config_file, flags)
    logs.setup(config.verbose, config.log_format)
    try:
        inherited = systemd.listen_fds()
    except systemd.SystemdError as err:
        raise click.ClickException(f"socket activation: {err}") from None
    server = Server(config, listen_fds=inherited)
    for spec in config.hooks:
        try:
            load_hook(spec)(server)
        except HookError as err:
            raise click.ClickException(str(err)) from None
    notifier = systemd.Notifier(on_error=_report_notify_error)

    def on_ready(server: Server) -> None:
        _report_listening(server)
        notifier.ready(f"listening on {_format_addresses(server)}")

    def on_signal(sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            return  # serve_forever reports the reload itself
        if sig == signal.SIGUSR1:
            notifier.status("draining (puts are refused)")
        else:
            notifier.stopping()
        _report_signal(sig)

    try:
        server.serve_forever(on_ready=on_ready, on_signal=on_signal)
    except OSError as err:
        if err.errno is None:
            # Not a socket error: the write-ahead log directory cannot be used.
            raise click.ClickException(str(err)) from None
        reason = err.strerror or str(err)
        where = _describe_listen(config)
        if _listened(server) or reason.startswith("cannot listen on "):
            raise click.ClickException(reason) from None
        raise click.ClickException(f"cannot listen on {where}: {reason}") from None
    except (ServerError, ImportError) as err:
        raise click.ClickException(str(err)) from None
    finally:
        notifier.stopping()


def _load_config(ctx: click.Context, config_file: str | None, flags: dict[str, Any]) -> Config:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = Config.load(config_file=config_file, flags=flags)
        except ConfigError as err:
            if err.field is not None and err.field in flags:
                param = next(p for p in ctx.command.params if p.name == err.field)
                raise click.BadParameter(err.problem, ctx=ctx, param=param) from None
            raise click.ClickException(str(err)) from None
    for warning in caught:
        _say(f"beanpole: warning: {warning.message}")
    return config


def _describe_listen(config: Config) -> str:
    return ", ".join(
        address
        if address.startswith(("unix:", "[")) or address.count(":") == 1
        else _format_address((address, config.port))
        for address in config.listen
    )


def _format_addresses(server: Server) -> str:
    return ", ".join(_format_address(address) for address in server.addresses)


def _listened(server: Server) -> bool:
    try:
        server.address  # noqa: B018 (raises if the server never got to listen)
    except ServerError:
        return False
    return True


def _report_listening(server: Server) -> None:
    config = server.config
    where = _format_addresses(server)
    if config.binlog_dir is None:
        log = "log: none (jobs live in memory only)"
    elif config.no_fsync:
        log = f"log: {config.binlog_dir}, never synced"
    elif config.fsync_ms == 0:
        log = f"log: {config.binlog_dir}, synced before every reply"
    else:
        log = f"log: {config.binlog_dir}, synced every {config.fsync_ms} ms"
    _LOG.info(
        "beanpole %s listening on %s; %s", _version(), where, log, extra={"bare": True}
    )
    report_http(server)


def _report_signal(sig: signal.Signals) -> None:
    action = "draining (puts are refused)" if sig == signal.SIGUSR1 else "stopping"
    _LOG.info("%s: %s", sig.name, action)


def _report_notify_error(err: OSError) -> None:
    _say(f"beanpole: warning: cannot notify systemd: {err.strerror or err}")


def _say(line: str) -> None:
    click.echo(line, err=True)
    sys.stderr.flush()


cli.add_command(binlog)
register_ops(cli)  # stats, top, exporter
register_admin(cli)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: run the ``beanpole`` command and exit."""
    cli.main(args=argv)
