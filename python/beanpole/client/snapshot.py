"""What the in-process admin calls of :class:`beanpole.Server` return and raise.

The calls themselves (``tube_stats``, ``job_stats``, ``tubes``, ``pause``, ``kick``,
``snapshot``) are methods of the server; the work is done in Rust, under the store lock,
with the GIL released.

Client layer: imports the settings, ``beanpole.addr`` and the native module at most;
nothing of ``beanpole.server``, ``.ops``, ``.cli`` or ``.spark``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from beanpole.client import errors

__all__ = ["TUBE_FIELDS", "NotFoundError", "Snapshot", "StatValue", "TubeRow", "row_of"]

StatValue: TypeAlias = int | float | str | bool
#: One tube's ``stats-tube`` values in :data:`TUBE_FIELDS` order.
TubeRow: TypeAlias = tuple[str, int, int, int, int, int, int, int, int, int, int, int, int, int]

#: The keys of ``stats-tube``, in the order of a :data:`TubeRow`.
TUBE_FIELDS: Final = (
    "name",
    "current-jobs-urgent",
    "current-jobs-ready",
    "current-jobs-reserved",
    "current-jobs-delayed",
    "current-jobs-buried",
    "total-jobs",
    "current-using",
    "current-watching",
    "current-waiting",
    "cmd-delete",
    "cmd-pause-tube",
    "pause",
    "pause-time-left",
)


class NotFoundError(errors.NotFoundError, KeyError):
    """The tube or job asked about does not exist. The same ``beanpole.NotFoundError``
    the clients raise for NOT_FOUND, and a ``KeyError``."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


@dataclass(frozen=True)
class Snapshot:
    """``stats`` and every tube's ``stats-tube``, read under one acquisition of the
    store lock (or, from a remote server, in one pipelined exchange)."""

    server: dict[str, StatValue]
    #: Every tube, in listing order; with a cap, only the tubes kept.
    tubes: list[TubeRow]
    #: With a cap that left tubes out: their figures summed under the name ``_other``.
    other: TubeRow | None = None
    #: How long the store lock was held, in seconds (0.0 when not known).
    lock_seconds: float = 0.0

    def tube_dicts(self) -> list[dict[str, StatValue]]:
        """The tubes as ``stats-tube`` dicts."""
        return [dict(zip(TUBE_FIELDS, row, strict=True)) for row in self.tubes]


def row_of(stats: dict[str, StatValue]) -> TubeRow:
    """A ``stats-tube`` dict as a :data:`TubeRow`."""

    def num(key: str) -> int:
        value = stats.get(key, 0)
        return value if isinstance(value, int) else 0

    return (
        str(stats.get("name", "")),
        num("current-jobs-urgent"),
        num("current-jobs-ready"),
        num("current-jobs-reserved"),
        num("current-jobs-delayed"),
        num("current-jobs-buried"),
        num("total-jobs"),
        num("current-using"),
        num("current-watching"),
        num("current-waiting"),
        num("cmd-delete"),
        num("cmd-pause-tube"),
        num("pause"),
        num("pause-time-left"),
    )
