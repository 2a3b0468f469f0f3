"""The few settings' defaults a start needs before the settings themselves load.

``beanpole serve`` listens before it imports :mod:`beanpole.config` (whose dataclass,
with what it imports, is the largest part of a start), so the default address and
port, and the choices of ``--log-format`` that the option table names, live here;
:class:`beanpole.Config` takes its defaults for them from this module, so each is
defined once.

Lowest layer: imports no other beanpole module (and nothing heavier than ``typing``);
every layer may import it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LISTEN", "LOG_FORMATS", "PORT"]

#: Where a server listens when no ``-l`` is given.
LISTEN: Final = ("127.0.0.1",)
#: The TCP port of the addresses given without one (``-p``): beanstalkd's.
PORT: Final = 11300
#: Formats of the log lines ``beanpole serve`` writes to stderr.
LOG_FORMATS: Final = ("text", "json")
