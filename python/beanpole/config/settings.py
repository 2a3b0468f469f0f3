"""The settings of one server: :class:`Config` (each setting one dataclass field, its
default, flag and help text), its errors, and building it from keyword arguments, the
environment, a TOML file or all three (:meth:`Config.load`).

Imports the checks (:mod:`beanpole.config.checks`), the sources
(:mod:`beanpole.config.sources`) and :mod:`beanpole.config.problems`; nothing else of
beanpole: everything else imports the settings.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict, TypeVar, Unpack

from beanpole.config.checks import (
    INT64_MAX,
    check_binlog_dir,
    check_bool,
    check_cluster,
    check_file,
    check_hooks,
    check_hosts,
    check_http,
    check_int,
    check_listen,
    check_tls,
    check_unix_mode,
)
from beanpole.config.problems import Invalid, did_you_mean
from beanpole.config.sources import CONFIG_FILE_ENV, env_values, env_var, toml_values
from beanpole.defaults import LISTEN, LOG_FORMATS, PORT

__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "LOG_FORMATS",
    "MAX_JOB_SIZE_LIMIT",
    "Config",
    "ConfigChanges",
    "ConfigError",
    "ConfigWarning",
    "flag",
    "help_text",
]

#: beanstalkd caps ``-z`` at 1 GiB; so do we.
MAX_JOB_SIZE_LIMIT: Final = 1 << 30
#: beanstalkd's default segment size (``-s``), 10 MiB.
DEFAULT_SEGMENT_SIZE: Final = 10 * 1024 * 1024

_T = TypeVar("_T")


class ConfigError(ValueError):
    """A setting has a bad value, or a configuration source cannot be read.

    ``field`` is the :class:`Config` field concerned (when there is one) and ``source``
    says where the value came from: a flag such as ``-p/--port``, an environment variable,
    or a key in a TOML file. The message names both.
    """

    def __init__(self, problem: str, *, field: str | None = None, source: str | None = None):
        self.problem = problem
        self.field = field
        self.source = source
        super().__init__(self._message())

    def _message(self) -> str:
        if self.field is None:
            return self.problem if self.source is None else f"{self.source}: {self.problem}"
        where = self.source or f"{self.field} (flag {flag(self.field)}, env {env_var(self.field)})"
        return f"invalid {where}: {self.problem}"

    def with_source(self, source: str) -> ConfigError:
        """The same error, attributed to ``source``."""
        return ConfigError(self.problem, field=self.field, source=source)


class ConfigWarning(UserWarning):
    """A setting was accepted but adjusted (e.g. a job size limit above 1 GiB)."""


class ConfigChanges(TypedDict, total=False):
    """Keyword arguments accepted by :meth:`Config.replace` and ``Server(...)``."""

    listen: str | Sequence[str]
    port: int
    unix_mode: int | None
    max_job_size: int
    user: str | None
    verbose: int
    threads: int
    binlog_dir: str | None
    fsync_ms: int
    no_fsync: bool
    segment_size: int
    skip_corrupt: bool
    hooks: tuple[str, ...]
    hook_queue: int
    log_format: str
    # -- metrics and the HTTP endpoint --
    http: str | None
    metrics_max_tubes: int
    admin_token_file: str | None
    http_read_token_file: str | None
    http_allowed_host: str | Sequence[str]
    http_max_connections: int
    tls_cert: str | None
    tls_key: str | None
    tls_client_ca: str | None
    max_connections: int
    max_memory: int
    cluster: str | None
    node: int | None
    commit_timeout_ms: int
    session_grace_ms: int
    log_cache_bytes: int
    snapshot_bytes: int


def _setting(default: _T, *, flag: str, doc: str) -> _T:
    value: _T = field(default=default, metadata={"flag": flag, "doc": doc})
    return value


@dataclass(frozen=True)
class Config:
    """Settings of one beanpole server. Immutable; use :meth:`replace` to derive another."""

    listen: tuple[str, ...] = _setting(
        LISTEN,
        flag="-l/--listen",
        doc="Address to listen on, repeatable: IPv4, IPv6, either with a port "
        "(127.0.0.1:11301, [::1]:11301), or unix:/path; tls: before a TCP address "
        "serves it with TLS (tls:0.0.0.0:11443).",
    )
    port: int = _setting(
        PORT,
        flag="-p/--port",
        doc="TCP port of the addresses given without one; 0 picks a free port.",
    )
    unix_mode: int | None = _setting(
        None,
        flag="--unix-mode",
        doc="Permissions of Unix sockets, in octal (e.g. 0660); without it the umask decides.",
    )
    max_job_size: int = _setting(
        65535,
        flag="-z/--max-job-size",
        doc=f"Maximum job body size in bytes (at most {MAX_JOB_SIZE_LIMIT}).",
    )
    user: str | None = _setting(
        None,
        flag="-u/--user",
        doc="Become this user (and its group) once the socket is bound.",
    )
    verbose: int = _setting(
        0,
        flag="-V/--verbose",
        doc="Verbosity; repeat the flag to increase it.",
    )
    threads: int = _setting(
        0,
        flag="--threads",
        doc="Worker threads; 0 means half the CPU cores, at least one.",
    )
    binlog_dir: str | None = _setting(
        None,
        flag="-b/--binlog-dir",
        doc="Keep a write-ahead log in this directory, so that jobs survive a restart.",
    )
    fsync_ms: int = _setting(
        50,
        flag="-f/--fsync-ms",
        doc="Sync the log to disk at most this many milliseconds after a change; "
        "0 syncs before every reply.",
    )
    no_fsync: bool = _setting(
        False,
        flag="-F/--no-fsync",
        doc="Never sync the log to disk (the operating system writes it when it chooses).",
    )
    segment_size: int = _setting(
        DEFAULT_SEGMENT_SIZE,
        flag="-s/--segment-size",
        doc="Size in bytes of each log file (segment); raised if a job of the maximum "
        "size would not fit.",
    )
    skip_corrupt: bool = _setting(
        False,
        flag="--skip-corrupt",
        doc="Start even if the log has corrupt records in the middle, dropping them "
        "(with a warning); without it such a log stops the server from starting.",
    )
    hooks: tuple[str, ...] = _setting(
        (),
        flag="--hooks",
        doc="Admin hooks to install: MODULE:FUNCTION, called with the server before it "
        "serves (repeatable; the variable takes a comma-separated list).",
    )
    hook_queue: int = _setting(
        65536,
        flag="--hook-queue",
        doc="Events that may wait for the hooks; beyond it events are dropped and counted.",
    )
    log_format: str = _setting(
        "text",
        flag="--log-format",
        doc="Format of log lines on stderr: text or json.",
    )
    # -- metrics and the HTTP endpoint --
    http: str | None = _setting(
        None,
        flag="--http",
        doc="Serve /metrics (Prometheus), /healthz, /readyz and the dashboard over HTTP on "
        "[HOST:]PORT (loopback when no host is given), or HTTPS on tls:HOST:PORT with "
        "--tls-cert and --tls-key.",
    )
    metrics_max_tubes: int = _setting(
        1000,
        flag="--metrics-max-tubes",
        doc="Tubes with series of their own in /metrics (the busiest); the rest are "
        'summed under tube="_other".',
    )
    admin_token_file: str | None = _setting(
        None,
        flag="--admin-token-file",
        doc="File holding the token that allows the dashboard's actions (kick, delete, "
        "pause, clear) on the --http endpoint, and the reading of job bodies; without "
        "it the actions are refused.",
    )
    http_read_token_file: str | None = _setting(
        None,
        flag="--http-read-token-file",
        doc="File holding the token that lets the dashboard read job bodies on the --http "
        "endpoint (the admin token does too); without either, bodies are hidden.",
    )
    http_allowed_host: tuple[str, ...] = _setting(
        (),
        flag="--http-allowed-host",
        doc="A host name the --http endpoint answers to besides localhost and its own "
        "addresses (repeatable; the variable takes a comma-separated list); requests "
        "for other hosts are answered 421.",
    )
    http_max_connections: int = _setting(
        64,
        flag="--http-max-connections",
        doc="Connections the --http endpoint serves at once; beyond it a slow one is "
        "closed to make room, or the new one is closed at once (both counted).",
    )
    tls_cert: str | None = _setting(
        None,
        flag="--tls-cert",
        doc="Certificate chain (PEM) of the tls: listeners and of --http tls:; re-read "
        "on SIGHUP.",
    )
    tls_key: str | None = _setting(
        None,
        flag="--tls-key",
        doc="Private key (PEM) of --tls-cert; re-read on SIGHUP.",
    )
    tls_client_ca: str | None = _setting(
        None,
        flag="--tls-client-ca",
        doc="CA certificates (PEM): only TLS clients (of the tls: listeners and of --http "
        "tls:) with a certificate they signed get in (mutual TLS).",
    )
    max_connections: int = _setting(
        0,
        flag="--max-connections",
        doc="Serve at most this many connections at once; more are closed at once "
        "(and counted). 0 means no limit.",
    )
    max_memory: int = _setting(
        0,
        flag="--max-memory",
        doc="Bytes the jobs may take (bodies plus a fixed overhead each); beyond it puts "
        "are answered OUT_OF_MEMORY until deletes make room. 0 means no limit.",
    )
    cluster: str | None = _setting(
        None,
        flag="--cluster",
        doc="Run as a node of the replicated cluster this TOML file lists ([[node]] "
        "entries with id, client and peer addresses); needs --node and -b.",
    )
    node: int | None = _setting(
        None,
        flag="--node",
        doc="This node's id in the --cluster file.",
    )
    commit_timeout_ms: int = _setting(
        5000,
        flag="--commit-timeout-ms",
        doc="Cluster nodes: how long a reply waits for a majority to have its change on "
        "disk; past it the client gets INTERNAL_ERROR (the outcome unknown) and its "
        "connection closes.",
    )
    session_grace_ms: int = _setting(
        5000,
        flag="--session-grace-ms",
        doc="Cluster nodes: how long the reservations of a client whose node is gone "
        "(stopped, crashed, or cut off from the leader) outlive it; past it its jobs "
        "are ready again.",
    )
    log_cache_bytes: int = _setting(
        16 << 20,
        flag="--log-cache-bytes",
        doc="Cluster nodes: bytes of the Raft log's records kept in memory; older "
        "committed entries are read back from disk when a follower that is behind or "
        "a restart needs them.",
    )
    snapshot_bytes: int = _setting(
        64 << 20,
        flag="--snapshot-bytes",
        doc="Cluster nodes: a node snapshots its state once its Raft log since the last "
        "snapshot holds more than these bytes of records and a snapshot would drop more "
        "than half of that log and the last snapshot (jobs deleted, changes made); the "
        "snapshot lets it drop the log it covers.",
    )

    def __post_init__(self) -> None:
        try:
            self._check()
        except Invalid as err:
            raise ConfigError(err.problem, field=err.field, source=err.source) from None

    def _check(self) -> None:
        object.__setattr__(self, "listen", check_listen(self.listen))
        check_int("port", self.port, low=0, high=65535, hint=" (0 picks a free port)")
        object.__setattr__(self, "unix_mode", check_unix_mode(self.unix_mode))
        check_int("max_job_size", self.max_job_size, low=0)
        if self.max_job_size > MAX_JOB_SIZE_LIMIT:
            warnings.warn(
                f"max_job_size {self.max_job_size} is above the limit; "
                f"maximum job size was set to {MAX_JOB_SIZE_LIMIT}",
                ConfigWarning,
                stacklevel=_caller_stacklevel(),
            )
            object.__setattr__(self, "max_job_size", MAX_JOB_SIZE_LIMIT)
        if self.user is not None and (not isinstance(self.user, str) or not self.user):
            raise ConfigError(f"must be a user name or None, got {self.user!r}", field="user")
        check_int("verbose", self.verbose, low=0)
        check_int("threads", self.threads, low=0, hint=" (0 means half the CPU cores)")
        if isinstance(self.binlog_dir, os.PathLike):
            object.__setattr__(self, "binlog_dir", os.fspath(self.binlog_dir))
        check_binlog_dir(self.binlog_dir)
        check_int("fsync_ms", self.fsync_ms, low=0, high=INT64_MAX)
        check_bool("no_fsync", self.no_fsync)
        check_int("segment_size", self.segment_size, low=1, high=INT64_MAX)
        check_bool("skip_corrupt", self.skip_corrupt)
        object.__setattr__(self, "hooks", check_hooks(self.hooks))
        check_int("hook_queue", self.hook_queue, low=1, high=1 << 24)
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                f"must be one of {', '.join(LOG_FORMATS)}, got {self.log_format!r}",
                field="log_format",
            )
        check_http(self.http)
        check_int("metrics_max_tubes", self.metrics_max_tubes, low=0, high=INT64_MAX)
        object.__setattr__(self, "http_allowed_host", check_hosts(self.http_allowed_host))
        check_int("http_max_connections", self.http_max_connections, low=1, high=1 << 20)
        for name in (
            "admin_token_file",
            "http_read_token_file",
            "tls_cert",
            "tls_key",
            "tls_client_ca",
        ):
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))
            check_file(name, getattr(self, name))
        check_tls(self)
        check_int("max_connections", self.max_connections, low=0, high=INT64_MAX)
        check_int("max_memory", self.max_memory, low=0, high=INT64_MAX)
        if isinstance(self.cluster, os.PathLike):
            object.__setattr__(self, "cluster", os.fspath(self.cluster))
        check_int("commit_timeout_ms", self.commit_timeout_ms, low=1, high=INT64_MAX)
        check_int("session_grace_ms", self.session_grace_ms, low=1, high=INT64_MAX)
        check_int("log_cache_bytes", self.log_cache_bytes, low=0, high=INT64_MAX)
        check_int("snapshot_bytes", self.snapshot_bytes, low=0, high=INT64_MAX)
        check_cluster(self)

    # -- building -----------------------------------------------------------------------

    def replace(self, **changes: Unpack[ConfigChanges]) -> Config:
        """A copy with ``changes`` applied, validated like a new ``Config``."""
        _check_names(changes, what="setting")
        values: dict[str, Any] = dict(changes)  # listen may be one string: made a tuple
        return dataclasses.replace(self, **values)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Config:
        """Defaults overridden by the ``BEANPOLE_*`` variables set in ``environ``.

        ``environ`` defaults to :data:`os.environ`. Empty variables count as unset. A value
        that cannot be parsed or is out of range raises :class:`ConfigError` naming the
        variable.
        """
        values, sources = _from_source(env_values, os.environ if environ is None else environ)
        return _build(cls, values, sources)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Config:
        """Defaults overridden by the settings in the TOML file at ``path``.

        The settings are either in a ``[beanpole]`` table (other tables are then ignored, so
        the file may be shared with other tools) or at the top level. Keys are the field
        names (``max_job_size``); an unknown key is an error.
        """
        values, sources = _from_source(toml_values, path, tuple(_field_names()))
        return _build(cls, values, sources)

    @classmethod
    def load(
        cls,
        *,
        config_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
        flags: Mapping[str, Any] | None = None,
    ) -> Config:
        """Combine every source with the command line's precedence.

        ``flags`` (values given on the command line, keyed by field name) win over the
        ``BEANPOLE_*`` variables of ``environ`` (default :data:`os.environ`), which win over
        the TOML file ``config_file`` (default: ``$BEANPOLE_CONFIG`` if set), which wins over
        the defaults. An invalid value raises :class:`ConfigError` naming where it came from.
        """
        environ = os.environ if environ is None else environ
        flags = dict(flags or {})
        _check_names(flags, what="flag setting")
        if config_file is None:
            config_file = environ.get(CONFIG_FILE_ENV) or None
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if config_file is not None:
            values, sources = _from_source(toml_values, config_file, tuple(_field_names()))
        env_values_, env_sources = _from_source(env_values, environ, flags.keys())
        values.update(env_values_)
        sources.update(env_sources)
        values.update(flags)
        sources.update({name: flag(name) for name in flags})
        return _build(cls, values, sources)


# -- field metadata ---------------------------------------------------------------------

_FIELDS: Final = {f.name: f for f in dataclasses.fields(Config)}



def flag(name: str) -> str:
    """The command-line flag(s) of the field ``name``, e.g. ``-p/--port``."""
    return str(_FIELDS[name].metadata["flag"])


def help_text(name: str) -> str:
    """One-sentence description of the field ``name``."""
    return str(_FIELDS[name].metadata["doc"])


def _check_names(names: Mapping[str, object], *, what: str) -> None:
    for name in names:
        if name not in _FIELDS:
            raise TypeError(f"unknown {what} {name!r}{did_you_mean(name, list(_FIELDS))}")


_R = TypeVar("_R")


def _from_source(read: Callable[..., _R], *args: object) -> _R:
    """A source's values, its problems raised as ConfigError."""
    try:
        return read(*args)
    except Invalid as err:
        raise ConfigError(err.problem, field=err.field, source=err.source) from None


def _build(cls: type[Config], values: Mapping[str, Any], sources: Mapping[str, str]) -> Config:
    try:
        return cls(**values)
    except ConfigError as err:
        if err.field is not None and err.field in sources and err.source is None:
            raise err.with_source(sources[err.field]) from None
        raise


def _field_names() -> list[str]:
    return list(_FIELDS)


def _caller_stacklevel() -> int:
    """Stack level pointing a warning at the code outside this module that built the Config."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in (__name__, "dataclasses"):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level
