"""The options of ``beanpole serve``, as data: one table that both parsers read.

:mod:`beanpole.cli.serve` builds the click command (help, every error message) from it,
and :mod:`beanpole.cli.serve_fast` parses the common, well-formed command lines with it
without importing click (a start is mostly imports). Adding a ``serve`` option means
adding a row here (and, for a setting, a :class:`beanpole.Config` field of that name).

The command, the top layer: imports any layer but ``beanpole.spark``; only the front
door (``beanpole.__main__``, the console script) and the command's own modules
import it.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from beanpole.defaults import LOG_FORMATS

__all__ = ["CONFIG_OPTION", "OPTIONS", "SETTINGS", "Option"]


class Option(NamedTuple):
    """One option. ``name`` is the :class:`beanpole.Config` field it sets (or
    ``config_file``); ``kind`` is ``text``, ``int``, ``flag`` (True when given),
    ``count`` (how many times given), ``file`` or ``dir`` (a path that must not be a
    directory, or a regular file) or ``choice`` (one of ``choices``)."""

    name: str
    decls: tuple[str, ...]
    kind: str = "text"
    metavar: str | None = None
    multiple: bool = False
    #: What the help says the default is, when not the Config default.
    default_help: str | None = None
    choices: tuple[str, ...] = ()


#: ``-c/--config``: the TOML file (not a setting itself).
CONFIG_OPTION: Final = Option("config_file", ("-c", "--config"), "file", "FILE")

#: The settings, in the order of ``beanpole serve --help``; ``-v/--version`` and
#: ``-h/--help`` are the command's own.
OPTIONS: Final = (
    Option("listen", ("-l", "--listen"), metavar="ADDR", multiple=True),
    Option("port", ("-p", "--port"), "int", "PORT"),
    Option("unix_mode", ("--unix-mode",), metavar="MODE"),
    Option("max_job_size", ("-z", "--max-job-size"), "int", "BYTES"),
    Option("user", ("-u", "--user"), metavar="USER"),
    Option("verbose", ("-V", "--verbose"), "count"),
    CONFIG_OPTION,
    Option("threads", ("--threads",), "int", "N"),
    Option(
        "binlog_dir",
        ("-b", "--binlog-dir"),
        "dir",
        "DIR",
        default_help="none (jobs live in memory only)",
    ),
    Option("fsync_ms", ("-f", "--fsync-ms"), "int", "MS"),
    Option("no_fsync", ("-F", "--no-fsync"), "flag"),
    Option("segment_size", ("-s", "--segment-size"), "int", "BYTES"),
    Option("skip_corrupt", ("--skip-corrupt",), "flag"),
    Option("hooks", ("--hooks",), metavar="MODULE:FUNCTION", multiple=True, default_help="none"),
    Option("hook_queue", ("--hook-queue",), "int", "N"),
    Option("log_format", ("--log-format",), "choice", choices=LOG_FORMATS),
    Option("http", ("--http",), metavar="[tls:][HOST:]PORT", default_help="off"),
    Option("metrics_max_tubes", ("--metrics-max-tubes",), "int", "N"),
    Option("admin_token_file", ("--admin-token-file",), metavar="FILE", default_help="none"),
    Option(
        "http_read_token_file",
        ("--http-read-token-file",),
        metavar="FILE",
        default_help="none",
    ),
    Option(
        "http_allowed_host",
        ("--http-allowed-host",),
        metavar="HOST",
        multiple=True,
        default_help="none",
    ),
    Option("http_max_connections", ("--http-max-connections",), "int", "N"),
    Option("tls_cert", ("--tls-cert",), metavar="FILE"),
    Option("tls_key", ("--tls-key",), metavar="FILE"),
    Option("tls_client_ca", ("--tls-client-ca",), metavar="FILE"),
    Option("max_connections", ("--max-connections",), "int", "N"),
    Option("max_memory", ("--max-memory",), "int", "BYTES"),
    Option("cluster", ("--cluster",), "file", "FILE", default_help="none (a single server)"),
    Option("node", ("--node",), "int", "ID", default_help="none"),
    Option("commit_timeout_ms", ("--commit-timeout-ms",), "int", "MS"),
    Option("session_grace_ms", ("--session-grace-ms",), "int", "MS"),
    Option("log_cache_bytes", ("--log-cache-bytes",), "int", "BYTES"),
    Option("snapshot_bytes", ("--snapshot-bytes",), "int", "BYTES"),
)

#: The Config fields ``serve`` takes from flags.
SETTINGS: Final = tuple(o.name for o in OPTIONS if o is not CONFIG_OPTION)
