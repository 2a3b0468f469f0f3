"""What ``beanpole serve`` does once its options are parsed: load the settings, set up
the log lines, start the server with its hooks, tell systemd, and serve until a signal
stops it.

Both parsers of the command line call :func:`run`: the click command
(:mod:`beanpole.cli.serve`) and the fast path of a start (:mod:`beanpole.cli.serve_fast`),
so this module imports no click. What stops a start is raised as :class:`ServeError`
(the command prints ``Error: ...`` and exits with status 1), or :class:`FlagError`
when a flag's value is refused (a usage error of that flag, exit status 2).

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings
from typing import Any

from beanpole import logs
from beanpole.cli.serve_errors import FlagError, ServeError
from beanpole.config import Config, ConfigError
from beanpole.ops.served import Server
from beanpole.server import systemd
from beanpole.server.embedded import ServerError
from beanpole.server.hooks import HookError, load_hook

__all__ = ["FlagError", "ServeError", "run"]

_LOG = logging.getLogger(logs.LOGGER)


def run(
    config_file: str | None, flags: dict[str, Any], listening: tuple[int, ...] = ()
) -> None:
    """Serve with the settings of ``flags`` (Config fields given on the command line),
    the environment and ``config_file``, until SIGTERM or SIGINT. ``listening``: the
    sockets the fast path bound ahead for the command line's addresses
    (:func:`beanpole.cli.serve_fast.bind_ahead`); the server adopts them, and they are
    closed here if the settings are refused first."""
    if "fsync_ms" in flags:
        # -f turns syncing on, as in beanstalkd, whatever the environment or file say.
        flags["no_fsync"] = False
    if not flags.get("hooks", True):
        del flags["hooks"]  # --hooks not given: click's empty tuple is no setting
    try:
        config = _load_config(config_file, flags)
    except ServeError:
        # A refused flag goes back to click, which starts again: free the addresses.
        for fd in listening:
            os.close(fd)
        raise
    logs.setup(config.verbose, config.log_format)
    if config.cluster is not None:
        for fd in listening:
            os.close(fd)
        from beanpole.cli.serve_cluster import run_node

        run_node(config, flags)
        return
    try:
        inherited = systemd.listen_fds()
    except systemd.SystemdError as err:
        raise ServeError(f"socket activation: {err}") from None
    server = Server(config, listen_fds=inherited or listening)
    for spec in config.hooks:
        try:
            load_hook(spec)(server)
        except HookError as err:
            raise ServeError(str(err)) from None
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
            raise ServeError(str(err)) from None
        reason = err.strerror or str(err)
        where = _describe_listen(config)
        if _listened(server) or reason.startswith("cannot listen on "):
            raise ServeError(reason) from None
        raise ServeError(f"cannot listen on {where}: {reason}") from None
    except (ServerError, ImportError) as err:
        raise ServeError(str(err)) from None
    finally:
        notifier.stopping()


def _version() -> str:
    from beanpole._core import __version__

    return __version__


def _format_address(address: tuple[str, int] | str) -> str:
    if isinstance(address, str):
        return f"unix:{address}"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _load_config(config_file: str | None, flags: dict[str, Any]) -> Config:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = Config.load(config_file=config_file, flags=flags)
        except ConfigError as err:
            if err.field is not None and err.field in flags:
                raise FlagError(err.field, err.problem) from None
            raise ServeError(str(err)) from None
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
    _report_http(server)


def _report_http(server: Server) -> None:
    """The start lines of ``serve --http``: where the metrics and the dashboard are."""
    address = server.http_address
    if address is None:
        return
    from beanpole.addr import is_tls_http

    shown = _format_address(address)
    scheme = "https" if is_tls_http(server.config.http or "") else "http"
    _LOG.info("metrics on %s://%s/metrics", scheme, shown)
    _LOG.info("dashboard on %s://%s/", scheme, shown)


def _report_signal(sig: signal.Signals) -> None:
    action = "draining (puts are refused)" if sig == signal.SIGUSR1 else "stopping"
    _LOG.info("%s: %s", sig.name, action)


def _report_notify_error(err: OSError) -> None:
    _say(f"beanpole: warning: cannot notify systemd: {err.strerror or err}")


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
