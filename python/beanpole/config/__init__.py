"""Server settings: the one place where beanpole's defaults live.

A :class:`Config` is built from keyword arguments, from ``BEANPOLE_*`` environment
variables (:meth:`Config.from_env`), from a TOML file (:meth:`Config.from_toml`), or from
all of them at once with the command line's precedence (:meth:`Config.load`): flag >
environment > TOML file > default. Every value is checked when the object is created, so a
``Config`` that exists is a valid one.

Each setting is one dataclass field of :mod:`.settings`; its metadata names the
command-line flag and carries the help text, and its environment variable is
``BEANPOLE_`` + the upper-cased field name. Adding a setting means adding one field,
one entry in :class:`ConfigChanges`, its check in ``Config._check`` (the checks are in
:mod:`.checks`) and its parser for the environment (:mod:`.sources`).

The lowest layer of the package with :mod:`beanpole.addr` and :mod:`beanpole.logs`: it
imports nothing of the clients, the server, ops, the command or spark.
"""

from __future__ import annotations

from beanpole.config.settings import (
    DEFAULT_SEGMENT_SIZE,
    LOG_FORMATS,
    MAX_JOB_SIZE_LIMIT,
    Config,
    ConfigChanges,
    ConfigError,
    ConfigWarning,
    flag,
    help_text,
)
from beanpole.config.sources import CONFIG_FILE_ENV, env_var, parse_bool

__all__ = [
    "CONFIG_FILE_ENV",
    "DEFAULT_SEGMENT_SIZE",
    "LOG_FORMATS",
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
