"""Where settings come from besides keyword arguments: the ``BEANPOLE_*`` environment
variables (one parser per field) and a TOML file (a ``[beanpole]`` table or the top
level). Values are parsed here and checked by :class:`beanpole.config.Config`.

Imports only the standard library and :mod:`beanpole.config.problems`; never the
settings themselves (they import this): the field names come in as an argument.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Final

from beanpole.config.problems import Invalid, did_you_mean

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PARSERS",
    "env_values",
    "env_var",
    "parse_bool",
    "parse_octal",
    "toml_values",
]

_ENV_PREFIX: Final = "BEANPOLE_"
#: Environment variable naming a TOML file, read by :meth:`Config.load`.
CONFIG_FILE_ENV: Final = "BEANPOLE_CONFIG"
_TOML_TABLE: Final = "beanpole"


def env_var(name: str) -> str:
    """The environment variable of the field ``name`` (``port`` -> ``BEANPOLE_PORT``)."""
    return _ENV_PREFIX + name.upper()



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


def parse_octal(raw: str) -> int:
    text = raw.strip().lower().removeprefix("0o")
    if not text or not text.isascii() or any(c not in "01234567" for c in text):
        raise ValueError(f"must be an octal mode such as 0660, got {raw!r}")
    return int(text, 8)


ENV_PARSERS: Final[Mapping[str, Callable[[str], object]]] = {
    "listen": _parse_list,
    "port": _parse_int,
    "unix_mode": parse_octal,
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
    "cluster": _parse_str,
    "node": _parse_int,
    "commit_timeout_ms": _parse_int,
    "session_grace_ms": _parse_int,
    "log_cache_bytes": _parse_int,
    "snapshot_bytes": _parse_int,
}


def env_values(
    environ: Mapping[str, str], skip: Collection[str] = ()
) -> tuple[dict[str, Any], dict[str, str]]:
    """Parsed values of the ``BEANPOLE_*`` variables set in ``environ`` (empty = unset)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, parse in ENV_PARSERS.items():
        var = env_var(name)
        raw = environ.get(var, "")
        if not raw or name in skip:
            continue
        try:
            values[name] = parse(raw)
        except ValueError as err:
            raise Invalid(str(err), field=name, source=var) from None
        sources[name] = var
    return values, sources


def toml_values(
    path: str | os.PathLike[str], known: Sequence[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings of a TOML config file, checked for unknown keys (not yet for values)."""
    import tomllib  # only with a config file: kept out of the usual start

    shown = os.fspath(path)
    try:
        with open(path, "rb") as f:
            document = tomllib.load(f)
    except OSError as err:
        raise Invalid(f"cannot read config file: {err.strerror or err}", source=shown) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise Invalid(f"not valid TOML: {err}", source=shown) from None
    table: dict[str, Any] = document
    where = "at the top level"
    if _TOML_TABLE in document:
        table = document[_TOML_TABLE]
        where = f"in the [{_TOML_TABLE}] table"
        if not isinstance(table, dict):
            raise Invalid(f"{_TOML_TABLE!r} must be a table", source=shown)
        stray = sorted(key for key in document if key in known)
        if stray:
            raise Invalid(
                f"{', '.join(stray)} must go inside the [{_TOML_TABLE}] table", source=shown
            )
    for key in table:
        if key not in known:
            raise Invalid(
                f"unknown key {key!r} {where}{did_you_mean(key, known)}; "
                f"known keys: {', '.join(known)}",
                source=shown,
            )
    return dict(table), {key: f"{key} in {shown}" for key in table}
