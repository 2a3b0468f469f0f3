"""The one option parser of the Spark sources, and the ``beanpole`` source's options.

Every source (``beanpole`` read, write and readStream, ``beanpole-binlog``) reads its
options through :class:`Options`, so they agree on spelling and checks:

* names are matched without regard to case, as Spark does; the canonical spelling is
  Spark's own camelCase (``maxJobs``, ``partitionsPerServer``). The hyphenated names
  of earlier releases (``max-jobs``, ``partitions-per-server``,
  ``max-partition-bytes``, ``min-partitions``) are kept as aliases;
* booleans take what the configuration takes: ``true``/``false``, ``1``/``0``,
  ``yes``/``no``, ``on``/``off``;
* tube names follow the protocol: 1 to 200 bytes of letters, digits and ``-+/;.$_()``,
  not starting with a hyphen;
* ``servers`` is a comma-separated list of ``host:port`` (or ``unix:/path``); naming a
  server twice is refused.

Every bad option raises one :class:`OptionError` (a ``ValueError``) naming the option
as the user spelled it, on the driver, before any task starts.

Imports nothing from the sources themselves (they import this).

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..client import DEFAULT_DELAY, DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, format_address
from ..config import parse_bool

NAME = "beanpole"

#: What ``ack`` may be: what a batch read does with the jobs once their rows are handed on.
ACKS = ("release", "delete", "bury", "none")
#: Largest priority, delay and ttr the protocol takes.
U32_MAX = 2**32 - 1
#: The characters of a tube name (the protocol's rule).
_TUBE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+/;.$_()")


class OptionError(ValueError):
    """An option of a beanpole source is missing or wrong."""


def is_tube_name(name: str) -> bool:
    """Whether the protocol takes ``name`` as a tube name."""
    return (
        0 < len(name.encode()) <= 200 and not name.startswith("-") and set(name) <= _TUBE_CHARS
    )


class Options:
    """A source's options as Spark hands them over, read and checked by name."""

    def __init__(self, source: str, options: Mapping[str, Any]) -> None:
        self.source = source
        self._values = {
            str(k).lower(): str(v).strip() for k, v in options.items() if v is not None
        }

    def fail(self, message: str) -> OptionError:
        return OptionError(f"{self.source}: {message}")

    def raw(self, name: str, aliases: Sequence[str] = ()) -> tuple[str, str | None]:
        """The spelling the user gave (the canonical name if none) and its value;
        an empty value counts as not given. Two spellings of one option are refused."""
        given = [n for n in (name, *aliases) if self._values.get(n.lower(), "") != ""]
        if len(given) > 1:
            raise self.fail(f"option {given[0]} is given twice (also as {given[1]})")
        if not given:
            return name, None
        return given[0], self._values[given[0].lower()]

    def text(self, name: str, default: str | None = None) -> str | None:
        return self.raw(name)[1] or default

    def whole(
        self, name: str, default: int, low: int, high: int, aliases: Sequence[str] = ()
    ) -> int:
        used, value = self.raw(name, aliases)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise self.fail(
                f"option {used} must be a whole number from {low} to {high}, not {value!r}"
            )
        return number

    def seconds(
        self, name: str, default: float | None, *, zero_is_none: bool = False
    ) -> float | None:
        """A number of seconds above 0 (or 0 for none, where ``zero_is_none``)."""
        value = self.raw(name)[1]
        if value is None:
            return default
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if zero_is_none and number == 0:
            return None
        if not number > 0 or math.isinf(number):
            what = "0 or more" if zero_is_none else "above 0"
            raise self.fail(f"option {name} must be a number of seconds {what}, not {value!r}")
        return number

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.raw(name)[1]
        if value is None:
            return default
        try:
            return parse_bool(value)
        except ValueError:
            raise self.fail(
                f"option {name} must be true or false (1/0, yes/no, on/off), not {value!r}"
            ) from None

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        value = (self.raw(name)[1] or default).lower()
        if value not in choices:
            raise self.fail(f"option {name} must be one of {', '.join(choices)}, not {value!r}")
        return value

    def servers(self) -> tuple[str, ...]:
        """The ``servers`` list: required, each ``host:port`` or a Unix socket, none twice."""
        value = self.raw("servers")[1]
        if not value:
            raise self.fail(
                'option servers is required: .option("servers", "host:11300,host2:11300")'
            )
        servers = tuple(_server(self, s.strip()) for s in value.split(",") if s.strip())
        if not servers:
            raise self.fail("option servers names no server")
        if len(set(servers)) != len(servers):
            raise self.fail(f"option servers names a server twice: {value}")
        return servers

    def tube(self, name: str, value: str) -> str:
        if not is_tube_name(value):
            raise self.fail(
                f"option {name} must be a tube name (1 to 200 bytes of letters, digits and "
                f"-+/;.$_(), not starting with -), not {value!r}"
            )
        return value

    def tubes(self) -> tuple[str, ...]:
        """``tube`` (one name, default ``default``) or ``tubes`` (several), not both."""
        tube, tubes = self.raw("tube")[1], self.raw("tubes")[1]
        if tube and tubes:
            raise self.fail("give option tube or option tubes, not both")
        if tubes:
            names = [self.tube("tubes", t.strip()) for t in tubes.split(",")]
            return tuple(dict.fromkeys(names))
        return (self.tube("tube", tube or DEFAULT_TUBE),)


def _server(opts: Options, text: str) -> str:
    if text.startswith("unix:") or text.startswith("/"):
        return format_address(text)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise opts.fail(
            "option servers takes host:port pairs separated by commas, "
            f"e.g. 'h1:11300,h2:11300'; {text!r} is not one"
        )
    return text


@dataclass(frozen=True)
class QueueOptions:
    """The options of one batch read or write of the ``beanpole`` source."""

    servers: tuple[str, ...]
    #: Where rows without a tube are written (the first of ``tubes``).
    tube: str
    #: Where a batch read reserves from.
    tubes: tuple[str, ...]
    priority: int
    delay: int
    ttr: int
    partitions_per_server: int
    max_jobs: int | None
    ack: str
    window: int
    timeout: float | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> QueueOptions:
        opts = Options(NAME, options)
        tubes = opts.tubes()
        max_jobs = opts.whole("maxJobs", 0, 0, 2**62, aliases=("max-jobs",))
        return cls(
            servers=opts.servers(),
            tube=tubes[0],
            tubes=tubes,
            priority=opts.whole("priority", DEFAULT_PRIORITY, 0, U32_MAX),
            delay=opts.whole("delay", DEFAULT_DELAY, 0, U32_MAX),
            ttr=opts.whole("ttr", DEFAULT_TTR, 0, U32_MAX),
            partitions_per_server=opts.whole(
                "partitionsPerServer", 1, 1, 1024, aliases=("partitions-per-server",)
            ),
            max_jobs=max_jobs or None,
            ack=opts.choice("ack", ACKS, "release"),
            window=opts.whole("window", 2000, 1, 1_000_000),
            timeout=opts.seconds("timeout", 30.0, zero_is_none=True),
        )
