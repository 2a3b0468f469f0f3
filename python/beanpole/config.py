"""Server settings: the one place where beanpole's defaults live.

A :class:`Config` is built from keyword arguments, from ``BEANPOLE_*`` environment
variables (:meth:`Config.from_env`), from a TOML file (:meth:`Config.from_toml`), or from
all of them at once with the command line's precedence (:meth:`Config.load`): flag >
environment > TOML file > default. Every value is checked when the object is created, so a
``Config`` that exists is a valid one.

Each setting is one dataclass field; its metadata names the command-line flag and carries
the help text, and its environment variable is ``BEANPOLE_`` + the upper-cased field name.
Adding a setting means adding one field, one entry in :class:`ConfigChanges`, its check in
``__post_init__`` and its parser for the environment.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import sys
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict, TypeVar, Unpack

__all__ = [
    "MAX_JOB_SIZE_LIMIT",
    "Config",
    "ConfigChanges",
    "ConfigError",
    "ConfigWarning",
    "env_var",
    "flag",
    "help_text",
    "parse_bool",
]

#: beanstalkd caps ``-z`` at 1 GiB; so do we.
MAX_JOB_SIZE_LIMIT: Final = 1 << 30
#: Longest ``sun_path`` Linux accepts for a unix socket, in bytes (108 minus the NUL).
_UNIX_PATH_MAX: Final = 107
_ENV_PREFIX: Final = "BEANPOLE_"
#: Environment variable naming a TOML file, read by :meth:`Config.load`.
CONFIG_FILE_ENV: Final = "BEANPOLE_CONFIG"
_TOML_TABLE: Final = "beanpole"
#: beanstalkd's default segment size (``-s``), 10 MiB.
DEFAULT_SEGMENT_SIZE: Final = 10 * 1024 * 1024
#: Formats of the log lines ``beanpole serve`` writes to stderr.
LOG_FORMATS: Final = ("text", "json")
#: The largest value the native layer takes for an integer setting (a signed 64-bit one).
_INT64_MAX: Final = (1 << 63) - 1

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


def _setting(default: _T, *, flag: str, doc: str) -> _T:
    value: _T = field(default=default, metadata={"flag": flag, "doc": doc})
    return value


@dataclass(frozen=True)
class Config:
    """Settings of one beanpole server. Immutable; use :meth:`replace` to derive another."""

    listen: tuple[str, ...] = _setting(
        ("127.0.0.1",),
        flag="-l/--listen",
        doc="Address to listen on, repeatable: IPv4, IPv6, either with a port "
        "(127.0.0.1:11301, [::1]:11301), or unix:/path; tls: before a TCP address "
        "serves it with TLS (tls:0.0.0.0:11443).",
    )
    port: int = _setting(
        11300,
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "listen", _check_listen(self.listen))
        _check_int("port", self.port, low=0, high=65535, hint=" (0 picks a free port)")
        object.__setattr__(self, "unix_mode", _check_unix_mode(self.unix_mode))
        _check_int("max_job_size", self.max_job_size, low=0)
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
        _check_int("verbose", self.verbose, low=0)
        _check_int("threads", self.threads, low=0, hint=" (0 means half the CPU cores)")
        if isinstance(self.binlog_dir, os.PathLike):
            object.__setattr__(self, "binlog_dir", os.fspath(self.binlog_dir))
        _check_binlog_dir(self.binlog_dir)
        _check_int("fsync_ms", self.fsync_ms, low=0, high=_INT64_MAX)
        _check_bool("no_fsync", self.no_fsync)
        _check_int("segment_size", self.segment_size, low=1, high=_INT64_MAX)
        _check_bool("skip_corrupt", self.skip_corrupt)
        object.__setattr__(self, "hooks", _check_hooks(self.hooks))
        _check_int("hook_queue", self.hook_queue, low=1, high=1 << 24)
        if self.log_format not in LOG_FORMATS:
            raise ConfigError(
                f"must be one of {', '.join(LOG_FORMATS)}, got {self.log_format!r}",
                field="log_format",
            )
        _check_http(self.http)
        _check_int("metrics_max_tubes", self.metrics_max_tubes, low=0, high=_INT64_MAX)
        object.__setattr__(self, "http_allowed_host", _check_hosts(self.http_allowed_host))
        _check_int("http_max_connections", self.http_max_connections, low=1, high=1 << 20)
        for name in (
            "admin_token_file",
            "http_read_token_file",
            "tls_cert",
            "tls_key",
            "tls_client_ca",
        ):
            if isinstance(getattr(self, name), os.PathLike):
                object.__setattr__(self, name, os.fspath(getattr(self, name)))
            _check_file(name, getattr(self, name))
        _check_tls(self)
        _check_int("max_connections", self.max_connections, low=0, high=_INT64_MAX)
        _check_int("max_memory", self.max_memory, low=0, high=_INT64_MAX)

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
        values, sources = _env_values(os.environ if environ is None else environ)
        return _build(cls, values, sources)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Config:
        """Defaults overridden by the settings in the TOML file at ``path``.

        The settings are either in a ``[beanpole]`` table (other tables are then ignored, so
        the file may be shared with other tools) or at the top level. Keys are the field
        names (``max_job_size``); an unknown key is an error.
        """
        values, sources = _toml_values(path)
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
            values, sources = _toml_values(config_file)
        env_values, env_sources = _env_values(environ, skip=flags.keys())
        values.update(env_values)
        sources.update(env_sources)
        values.update(flags)
        sources.update({name: flag(name) for name in flags})
        return _build(cls, values, sources)


# -- field metadata ---------------------------------------------------------------------

_FIELDS: Final = {f.name: f for f in dataclasses.fields(Config)}


def env_var(name: str) -> str:
    """The environment variable of the field ``name`` (``port`` -> ``BEANPOLE_PORT``)."""
    return _ENV_PREFIX + name.upper()


def flag(name: str) -> str:
    """The command-line flag(s) of the field ``name``, e.g. ``-p/--port``."""
    return str(_FIELDS[name].metadata["flag"])


def help_text(name: str) -> str:
    """One-sentence description of the field ``name``."""
    return str(_FIELDS[name].metadata["doc"])


# -- checks -----------------------------------------------------------------------------


def _caller_stacklevel() -> int:
    """Stack level pointing a warning at the code outside this module that built the Config."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in (__name__, "dataclasses"):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


def _check_int(
    name: str, value: object, *, low: int, high: int | None = None, hint: str = ""
) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"must be an integer, got {value!r}", field=name)
    if value < low or (high is not None and value > high):
        if high is None or (high == _INT64_MAX and value < low):
            bound = f"at least {low}"
        elif high == _INT64_MAX:
            bound = f"at most {high}"
        else:
            bound = f"between {low} and {high}"
        raise ConfigError(f"must be {bound}{hint}, got {value}", field=name)


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"must be true or false, got {value!r}", field=name)


def _check_binlog_dir(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise ConfigError(f"must be a directory path or None, got {value!r}", field="binlog_dir")
    if not value:
        raise ConfigError("must be a directory path, got an empty string", field="binlog_dir")
    if "\0" in value:
        raise ConfigError("directory path contains a NUL byte", field="binlog_dir")


def _check_file(name: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"must be a file path or None, got {value!r}", field=name)


def _check_tls(config: Config) -> None:
    """A tls: listener needs a certificate and a key; one of the pair needs the other."""
    tls_listeners = [a for a in config.listen if a.startswith("tls:")]
    if config.tls_cert is None and config.tls_key is not None:
        raise ConfigError("needs --tls-cert as well", field="tls_key")
    if config.tls_key is None and config.tls_cert is not None:
        raise ConfigError("needs --tls-key as well", field="tls_cert")
    if tls_listeners and config.tls_cert is None:
        raise ConfigError(
            f"{tls_listeners[0]} needs a certificate and a key (--tls-cert, --tls-key)",
            field="listen",
        )
    if config.http is not None and config.http.strip().startswith("tls:") and (
        config.tls_cert is None
    ):
        raise ConfigError(
            f"{config.http} needs a certificate and a key (--tls-cert, --tls-key)",
            field="http",
        )
    if config.tls_client_ca is not None and config.tls_cert is None:
        raise ConfigError("needs --tls-cert and --tls-key as well", field="tls_client_ca")


def _check_listen(value: object) -> tuple[str, ...]:
    """The addresses of ``listen`` as a tuple (one string is one address), each checked."""
    if isinstance(value, str):
        items: tuple[object, ...] = (value,)
    elif isinstance(value, (list, tuple)):
        items = tuple(value)
    else:
        raise ConfigError(
            f"must be an address or a list of addresses, got {value!r}", field="listen"
        )
    if not items:
        raise ConfigError("needs at least one address", field="listen")
    for item in items:
        _check_address(item)
    return tuple(str(item) for item in items)


def _check_address(value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, got {value!r}", field="listen")
    if value.startswith("tls:"):
        if not _is_ip_address(value.removeprefix("tls:")):
            raise ConfigError(
                f"tls: takes an IPv4 or IPv6 address, with an optional port "
                f"(tls:0.0.0.0:11443, tls:[::1]:11443), got {value!r}",
                field="listen",
            )
        return
    if value.startswith("unix:"):
        path = value.removeprefix("unix:")
        if not path:
            raise ConfigError(
                "unix: needs a socket path, e.g. unix:/run/beanpole.sock", field="listen"
            )
        if "\0" in path:
            raise ConfigError("socket path contains a NUL byte", field="listen")
        if len(os.fsencode(path)) > _UNIX_PATH_MAX:
            raise ConfigError(
                f"socket path is longer than {_UNIX_PATH_MAX} bytes: {path!r}", field="listen"
            )
        return
    if not _is_ip_address(value):
        hint = ""
        if value.count(":") > 1 and not value.startswith("["):
            hint = " (an IPv6 address takes a port only in brackets: [::1]:11301)"
        raise ConfigError(
            f"must be an IPv4 address (e.g. 127.0.0.1 or 0.0.0.0), an IPv6 address (e.g. ::1, "
            f"::, [::1]), either with a port (127.0.0.1:11301, [::1]:11301), or unix:/path, "
            f"got {value!r}{hint}",
            field="listen",
        )


def _is_ip_address(value: str) -> bool:
    """Whether ``value`` is ``IPv4``, ``IPv6``, ``[IPv6]``, ``IPv4:PORT`` or ``[IPv6]:PORT``."""
    if value.startswith("["):
        inside, bracket, after = value[1:].partition("]")
        if not bracket or not _is_ip(inside, version=6):
            return False
        return after == "" or (after.startswith(":") and _is_port(after[1:]))
    if _is_ip(value):
        return True
    host, colon, port = value.partition(":")
    return bool(colon) and _is_ip(host, version=4) and _is_port(port)


def _is_ip(text: str, version: int | None = None) -> bool:
    if "%" in text:
        return False  # an IPv6 scope (fe80::1%eth0) is not supported
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return version is None or address.version == version


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and int(text) <= 65535


def _check_unix_mode(value: object) -> int | None:
    """``unix_mode`` as an int: an int as is, a string read as octal (``"0660"``)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = _parse_octal(value)
        except ValueError as err:
            raise ConfigError(str(err), field="unix_mode") from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"must be an octal mode such as 0660, got {value!r}", field="unix_mode")
    if not 0 <= value <= 0o777:
        raise ConfigError(f"must be between 0 and 0777, got {value:#o}", field="unix_mode")
    return value


def _check_hooks(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"must be a list of MODULE:FUNCTION, got {value!r}", field="hooks")
    for spec in value:
        module, sep, function = spec.partition(":")
        if not sep or not module.strip() or not function.strip():
            raise ConfigError(f"must be MODULE:FUNCTION, got {spec!r}", field="hooks")
    return tuple(value)
def _check_hosts(value: object) -> tuple[str, ...]:
    """``http_allowed_host`` as a tuple of lower-case names (one string is one name)."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"must be a list of host names, got {value!r}", field="http_allowed_host")
    names = []
    for name in value:
        host = name.strip().lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not host or not host.isascii() or any(c in host for c in " /\\?#@\t\r\n"):
            raise ConfigError(f"must be a host name or address, got {name!r}",
                              field="http_allowed_host")
        names.append(host)
    return tuple(names)


def _check_http(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise ConfigError(f"must be [HOST:]PORT or None, got {value!r}", field="http")
    from beanpole.addr import parse_http

    try:
        parse_http(value)
    except ValueError as err:
        raise ConfigError(f"must be [HOST:]PORT: {err}", field="http") from None


def _check_names(names: Mapping[str, object], *, what: str) -> None:
    for name in names:
        if name not in _FIELDS:
            raise TypeError(f"unknown {what} {name!r}{_did_you_mean(name)}")


def _did_you_mean(name: str) -> str:
    import difflib  # only for a mistake: kept out of every start

    close = difflib.get_close_matches(name, list(_FIELDS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _build(cls: type[Config], values: Mapping[str, Any], sources: Mapping[str, str]) -> Config:
    try:
        return cls(**values)
    except ConfigError as err:
        if err.field is not None and err.field in sources and err.source is None:
            raise err.with_source(sources[err.field]) from None
        raise


# -- sources ----------------------------------------------------------------------------


_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def _parse_int(raw: str) -> int:
    try:
        return int(raw.strip(), 10)
    except ValueError:
        raise ValueError(f"must be an integer, got {raw!r}") from None


def parse_bool(raw: str) -> bool:
    """A boolean as every setting spells it: 1/0, true/false, yes/no, on/off."""
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"must be true or false (1/0, yes/no, on/off), got {raw!r}")


def _parse_str(raw: str) -> str:
    return raw


def _parse_list(raw: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def _parse_octal(raw: str) -> int:
    text = raw.strip().lower().removeprefix("0o")
    if not text or not text.isascii() or any(c not in "01234567" for c in text):
        raise ValueError(f"must be an octal mode such as 0660, got {raw!r}")
    return int(text, 8)


_ENV_PARSERS: Final[Mapping[str, Callable[[str], object]]] = {
    "listen": _parse_list,
    "port": _parse_int,
    "unix_mode": _parse_octal,
    "max_job_size": _parse_int,
    "user": _parse_str,
    "verbose": _parse_int,
    "threads": _parse_int,
    "binlog_dir": _parse_str,
    "fsync_ms": _parse_int,
    "no_fsync": parse_bool,
    "segment_size": _parse_int,
    "skip_corrupt": parse_bool,
    "hooks": _parse_list,
    "hook_queue": _parse_int,
    "log_format": _parse_str,
    "http": _parse_str,
    "metrics_max_tubes": _parse_int,
    "admin_token_file": _parse_str,
    "http_read_token_file": _parse_str,
    "http_allowed_host": _parse_list,
    "http_max_connections": _parse_int,
    "tls_cert": _parse_str,
    "tls_key": _parse_str,
    "tls_client_ca": _parse_str,
    "max_connections": _parse_int,
    "max_memory": _parse_int,
}


def _env_values(
    environ: Mapping[str, str], skip: Collection[str] = ()
) -> tuple[dict[str, Any], dict[str, str]]:
    """Parsed values of the ``BEANPOLE_*`` variables set in ``environ`` (empty = unset)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, parse in _ENV_PARSERS.items():
        var = env_var(name)
        raw = environ.get(var, "")
        if not raw or name in skip:
            continue
        try:
            values[name] = parse(raw)
        except ValueError as err:
            raise ConfigError(str(err), field=name, source=var) from None
        sources[name] = var
    return values, sources


def _toml_values(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings of a TOML config file, checked for unknown keys (not yet for values)."""
    import tomllib  # only with a config file: kept out of the usual start

    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except OSError as err:
        raise ConfigError(f"cannot read config file: {err.strerror or err}", source=shown) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"not valid TOML: {err}", source=shown) from None
    table: dict[str, Any] = document
    where = "at the top level"
    if _TOML_TABLE in document:
        table = document[_TOML_TABLE]
        where = f"in the [{_TOML_TABLE}] table"
        if not isinstance(table, dict):
            raise ConfigError(f"{_TOML_TABLE!r} must be a table", source=shown)
        stray = sorted(key for key in document if key in _FIELDS)
        if stray:
            raise ConfigError(
                f"{', '.join(stray)} must go inside the [{_TOML_TABLE}] table", source=shown
            )
    for key in table:
        if key not in _FIELDS:
            raise ConfigError(
                f"unknown key {key!r} {where}{_did_you_mean(key)}; "
                f"known keys: {', '.join(_FIELDS)}",
                source=shown,
            )
    return dict(table), {key: f"{key} in {shown}" for key in table}
