"""The options of the streaming reader (``spark.readStream.format("beanpole")``), checked.

Every problem is one ``ValueError`` whose message names the option and what it takes,
raised when the source is created (at ``.load()``), before any query starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NAME = "beanpole"

#: Rows of the queue readers (the batch reader gives the same columns).
QUEUE_SCHEMA = "server string, id bigint, tube string, priority bigint, body binary"

#: Jobs one micro-batch reserves, over every server and tube, unless told otherwise.
DEFAULT_MAX_ROWS_PER_TRIGGER = 100_000
#: Seconds a connection waits to connect, and for each reply.
DEFAULT_TIMEOUT = 30.0
#: Seconds a restarted query waits for a job that a previous run's connection still
#: holds (it goes back to ready when that connection closes).
DEFAULT_RELEASE_WAIT = 10.0

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def _get(options: Mapping[str, Any], name: str) -> str | None:
    # Spark hands the options over case-insensitively; a plain dict may not be.
    for key, value in options.items():
        if key.lower() == name.lower():
            return None if value is None else str(value).strip()
    return None


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _positive_int(options: Mapping[str, Any], name: str, default: int) -> int:
    value = _get(options, name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ValueError(f"{NAME}: option {name} must be a positive whole number, not {value!r}")
    return number


def _seconds(options: Mapping[str, Any], name: str, default: float | None) -> float | None:
    value = _get(options, name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not number > 0 or math.isinf(number):
        raise ValueError(
            f"{NAME}: option {name} must be a positive number of seconds, not {value!r}"
        )
    return number


def _flag(options: Mapping[str, Any], name: str) -> bool:
    value = (_get(options, name) or "false").lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{NAME}: option {name} must be true or false, not {value!r}")


def _server(text: str) -> str:
    host, sep, port = text.rpartition(":")
    if text.startswith("unix:") or text.startswith("/"):
        return text
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"{NAME}: option servers takes host:port pairs separated by commas, "
            f"e.g. 'h1:11300,h2:11300'; {text!r} is not one"
        )
    return text


def _tube(name: str) -> str:
    # The protocol's rule for names: 1 to 200 bytes of letters, digits and -+/;.$_()
    # that do not start with a hyphen.
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+/;.$_()")
    if not 0 < len(name) <= 200 or name.startswith("-") or not set(name) <= allowed:
        raise ValueError(f"{NAME}: {name!r} is not a valid tube name")
    return name


@dataclass(frozen=True)
class StreamSettings:
    """What a streaming read does."""

    #: The server addresses, as given (they name the servers in rows and offsets).
    servers: tuple[str, ...]
    tubes: tuple[str, ...]
    max_rows_per_trigger: int
    #: None: touch held jobs every half of the smallest TTR seen.
    touch_interval: float | None
    timeout: float
    release_wait: float
    #: Fill ``priority`` with a ``stats-job`` per row (pipelined, in the tasks).
    with_priority: bool
    #: Append one JSON line per call Spark makes to the reader here (for debugging).
    call_log: str | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> StreamSettings:
        servers_opt = _get(options, "servers")
        if not servers_opt:
            raise ValueError(
                f"{NAME}: give the servers to read from: .option('servers', 'h1:11300,h2:11300')"
            )
        servers = tuple(dict.fromkeys(_server(s) for s in _split(servers_opt)))
        if not servers:
            raise ValueError(f"{NAME}: option servers names no server")
        tube = _get(options, "tube")
        tubes = _get(options, "tubes")
        if tube and tubes:
            raise ValueError(f"{NAME}: give option tube or option tubes, not both")
        names = _split(tubes) if tubes else [tube or "default"]
        if not names:
            raise ValueError(f"{NAME}: option tubes names no tube")
        release_wait = _seconds(options, "releaseWait", DEFAULT_RELEASE_WAIT)
        timeout = _seconds(options, "timeout", DEFAULT_TIMEOUT)
        assert release_wait is not None and timeout is not None
        return cls(
            servers=servers,
            tubes=tuple(dict.fromkeys(_tube(n) for n in names)),
            max_rows_per_trigger=_positive_int(
                options, "maxRowsPerTrigger", DEFAULT_MAX_ROWS_PER_TRIGGER
            ),
            touch_interval=_seconds(options, "touchInterval", None),
            timeout=timeout,
            release_wait=release_wait,
            with_priority=_flag(options, "withPriority"),
            call_log=_get(options, "callLog") or None,
        )
