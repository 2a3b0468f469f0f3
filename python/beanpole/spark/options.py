"""The options of the ``beanpole`` data source, checked once on the driver.

Every bad option raises one ``ValueError`` that names the option and what it takes,
before any task starts. The same settings object is pickled to the tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..client import DEFAULT_DELAY, DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, format_address

NAME = "beanpole"

#: What ``ack`` may be: what a batch read does with the jobs once their rows are handed on.
ACKS = ("delete", "release", "bury", "none")
#: Largest priority, delay and ttr the protocol takes.
U32_MAX = 2**32 - 1


class OptionError(ValueError):
    """An option of the ``beanpole`` source is missing or wrong."""


def _get(options: Mapping[str, Any], name: str) -> str | None:
    # Spark hands over a case-insensitive dict; a plain dict may come from tests.
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    return None if value is None else str(value).strip()


def _int(options: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    raw = _get(options, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"{NAME}: option {name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise OptionError(f"{NAME}: option {name} must be between {low} and {high}, not {value}")
    return value


def _tube(name: str, value: str) -> str:
    if not value or len(value.encode()) > 200 or any(c.isspace() for c in value):
        raise OptionError(
            f"{NAME}: option {name} must be a tube name (1 to 200 bytes, no spaces), not {value!r}"
        )
    return value


@dataclass(frozen=True)
class QueueOptions:
    """The options of one read or write."""

    servers: tuple[str, ...]
    tube: str
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
        raw = _get(options, "servers")
        servers = tuple(format_address(s.strip()) for s in (raw or "").split(",") if s.strip())
        if not servers:
            raise OptionError(
                f'{NAME}: option servers is required: .option("servers", "host:11300,host2:11300")'
            )
        if len(set(servers)) != len(servers):
            raise OptionError(f"{NAME}: option servers names a server twice: {raw}")
        tube = _tube("tube", _get(options, "tube") or DEFAULT_TUBE)
        raw_tubes = _get(options, "tubes")
        if raw_tubes is not None:
            tubes = tuple(_tube("tubes", t.strip()) for t in raw_tubes.split(","))
        else:
            tubes = (tube,)
        ack = (_get(options, "ack") or "delete").lower()
        if ack not in ACKS:
            raise OptionError(f"{NAME}: option ack must be one of {', '.join(ACKS)}, not {ack!r}")
        max_jobs = _int(options, "max-jobs", 0, 0, 2**62)
        timeout = _int(options, "timeout", 30, 0, 86400)
        return cls(
            servers=servers,
            tube=tube,
            tubes=tubes,
            priority=_int(options, "priority", DEFAULT_PRIORITY, 0, U32_MAX),
            delay=_int(options, "delay", DEFAULT_DELAY, 0, U32_MAX),
            ttr=_int(options, "ttr", DEFAULT_TTR, 0, U32_MAX),
            partitions_per_server=_int(options, "partitions-per-server", 1, 1, 1024),
            max_jobs=max_jobs or None,
            ack=ack,
            window=_int(options, "window", 2000, 1, 1_000_000),
            timeout=float(timeout) if timeout else None,
        )
