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
from collections.abc import Callable, Collection, Mapping
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

    listen: str
    port: int
    max_job_size: int
    user: str | None
    verbose: int
    threads: int
    binlog_dir: str | None
    fsync_ms: int
    no_fsync: bool
    segment_size: int
    skip_corrupt: bool
    max_connections: int
    max_memory: int


def _setting(default: _T, *, flag: str, doc: str) -> _T:
    value: _T = field(default=default, metadata={"flag": flag, "doc": doc})
    return value


@dataclass(frozen=True)
class Config:
    """Settings of one beanpole server. Immutable; use :meth:`replace` to derive another."""

    listen: str = _setting(
        "127.0.0.1",
        flag="-l/--listen",
        doc="Address to listen on: IPv4, IPv6 or unix:/path.",
    )
    port: int = _setting(
        11300,
        flag="-p/--port",
        doc="TCP port to listen on; 0 picks a free port.",
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
        _check_listen(self.listen)
        _check_int("port", self.port, low=0, high=65535, hint=" (0 picks a free port)")
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
        _check_int("max_connections", self.max_connections, low=0, high=_INT64_MAX)
        _check_int("max_memory", self.max_memory, low=0, high=_INT64_MAX)

    # -- building -----------------------------------------------------------------------

    def replace(self, **changes: Unpack[ConfigChanges]) -> Config:
        """A copy with ``changes`` applied, validated like a new ``Config``."""
        _check_names(changes, what="setting")
        return dataclasses.replace(self, **changes)

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


def _check_listen(value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"must be a string, got {value!r}", field="listen")
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
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ConfigError(
            f"must be an IPv4 address (e.g. 127.0.0.1 or 0.0.0.0), an IPv6 address without "
            f"brackets (e.g. ::1 or ::) or unix:/path, got {value!r}",
            field="listen",
        ) from None


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


def _parse_bool(raw: str) -> bool:
    word = raw.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(f"must be true or false (1/0, yes/no, on/off), got {raw!r}")


def _parse_str(raw: str) -> str:
    return raw


_ENV_PARSERS: Final[Mapping[str, Callable[[str], object]]] = {
    "listen": _parse_str,
    "port": _parse_int,
    "max_job_size": _parse_int,
    "user": _parse_str,
    "verbose": _parse_int,
    "threads": _parse_int,
    "binlog_dir": _parse_str,
    "fsync_ms": _parse_int,
    "no_fsync": _parse_bool,
    "segment_size": _parse_int,
    "skip_corrupt": _parse_bool,
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
