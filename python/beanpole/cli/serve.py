"""``beanpole serve`` as a click command: its help and every usage error.

It takes beanstalkd's flags (``-l -p -z -u -V -v``, and ``-b -f -F -s`` for the
write-ahead log) plus ``-c/--config``, ``--threads`` and ``--skip-corrupt``; every setting
can also come from a ``BEANPOLE_*`` environment variable or a TOML file. Defaults and
validation live in :mod:`beanpole.config`, the options in :mod:`beanpole.cli.serve_options`,
what serving does in :mod:`beanpole.cli.serve_run`.

A well-formed start does not come here: :mod:`beanpole.cli.serve_fast` parses it without
importing click and calls the same :func:`beanpole.cli.serve_run.run`. Everything else does
(``--help``, ``--version``, a malformed or unknown option, a refused value).

Exit status: 0 after a clean stop, 2 for a usage error (unknown flag, malformed or
out-of-range flag value, ``-f`` with ``-F``), 1 with a one-line message for anything else
that prevents serving (address in use, bad environment variable or config file, unknown
user, a log directory that is locked, corrupt or holds beanstalkd binlog files).

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from beanpole.cli.group import CONTEXT_SETTINGS, version_option
from beanpole.cli.serve_options import CONFIG_OPTION, OPTIONS, SETTINGS, Option
from beanpole.cli.serve_run import FlagError, ServeError, run
from beanpole.config import CONFIG_FILE_ENV, Config, env_var, help_text

__all__ = ["serve"]

_DEFAULTS = Config()
_F = TypeVar("_F", bound=Callable[..., Any])


def _help(name: str, default: str | None = None) -> str:
    """Help text of a Config field, with its default (read from Config) and its variable."""
    if default is None:
        value = getattr(_DEFAULTS, name)
        default = None if value is None or isinstance(value, bool) else str(value)
    extra = f"default: {default}; " if default is not None else ""
    return f"{help_text(name)}  [{extra}env: {env_var(name)}]"


def _click_option(option: Option) -> Callable[[_F], _F]:
    """The click option of a row of the table."""
    if option is CONFIG_OPTION:
        return click.option(
            *option.decls,
            option.name,
            type=click.Path(dir_okay=False),
            metavar=option.metavar,
            help=f"Read settings from this TOML file.  [env: {CONFIG_FILE_ENV}]",
        )
    default = option.default_help
    if option.name == "listen":
        default = f"{_DEFAULTS.listen[0]} (loopback only)"
    kwargs: dict[str, Any] = {"help": _help(option.name, default)}
    if option.metavar is not None:
        kwargs["metavar"] = option.metavar
    if option.multiple:
        kwargs["multiple"] = True
    match option.kind:
        case "int":
            kwargs["type"] = int
        case "flag":
            kwargs["is_flag"] = True
        case "count":
            kwargs["count"] = True
        case "file":
            kwargs["type"] = click.Path(dir_okay=False)
        case "dir":
            kwargs["type"] = click.Path(file_okay=False)
        case "choice":
            kwargs["type"] = click.Choice(option.choices)
    return click.option(*option.decls, option.name, **kwargs)




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
max_connections, max_memory, cluster, node, commit_timeout_ms,
session_grace_ms.

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



def _serve(ctx: click.Context, /, config_file: str | None, **options: Any) -> None:
    """Run a server until SIGTERM or SIGINT."""
    flags = {
        name: options[name]
        for name in SETTINGS
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
    if "fsync_ms" in flags and flags.get("no_fsync"):
        raise click.UsageError("-f/--fsync-ms and -F/--no-fsync cannot be used together", ctx=ctx)
    try:
        run(config_file, flags)
    except FlagError as err:
        param = next(p for p in ctx.command.params if p.name == err.field)
        raise click.BadParameter(err.problem, ctx=ctx, param=param) from None
    except ServeError as err:
        raise click.ClickException(str(err)) from None


def _build() -> click.Command:
    command: Callable[..., Any] = click.pass_context(_serve)
    # click applies decorators bottom-up: the last applied is the first in --help.
    decorators = []
    for option in OPTIONS:
        decorators.append(_click_option(option))
        if option.name == "verbose":
            decorators.append(version_option("-v"))
    for decorate in reversed(decorators):
        command = decorate(command)
    return click.command(name="serve", epilog=_SERVE_EPILOG, context_settings=CONTEXT_SETTINGS)(
        command
    )


serve = _build()
