"""Offsets of the streaming reader: each one names the jobs of its micro-batch.

An offset is the JSON dict Spark writes to the checkpoint's offset log::

    {"batch": 7,
     "jobs": {"h1:11300": {"emails": "101-2100,2203"}},
     "redelivered": 0, "lost": 0}

``batch`` counts the reader's micro-batches (0 is the initial offset, which names no
job). ``jobs`` lists, per server and tube, the ids reserved for that batch, as
ascending ranges ``first-last`` and single ids separated by commas: ids put in a row
come out as one range, so the log stays small; at worst a batch of N jobs costs about
8 bytes per job. ``redelivered`` and ``lost`` are the query's running counts of jobs
that may have been delivered twice (see docs/spark.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: (server, tube) -> job ids.
JobMap = dict[tuple[str, str], list[int]]


def encode_ids(ids: Iterable[int]) -> str:
    """Ascending ids as ``a-b,c,...`` ranges."""
    out: list[str] = []
    first = last = -2
    for i in sorted(ids):
        if i == last + 1:
            last = i
            continue
        if first >= 0:
            out.append(str(first) if first == last else f"{first}-{last}")
        first = last = i
    if first >= 0:
        out.append(str(first) if first == last else f"{first}-{last}")
    return ",".join(out)


def decode_ids(text: str) -> list[int]:
    """The ids of :func:`encode_ids`'s text."""
    ids: list[int] = []
    for part in text.split(","):
        if not part:
            continue
        first, sep, last = part.partition("-")
        if sep:
            ids.extend(range(int(first), int(last) + 1))
        else:
            ids.append(int(first))
    return ids


@dataclass(frozen=True)
class Offset:
    batch: int
    jobs: JobMap = field(default_factory=dict)
    redelivered: int = 0
    lost: int = 0

    def to_json(self) -> dict[str, Any]:
        jobs: dict[str, dict[str, str]] = {}
        for (server, tube), ids in sorted(self.jobs.items()):
            if ids:
                jobs.setdefault(server, {})[tube] = encode_ids(ids)
        return {
            "batch": self.batch,
            "jobs": jobs,
            "redelivered": self.redelivered,
            "lost": self.lost,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Offset:
        try:
            jobs: JobMap = {}
            for server, tubes in dict(data.get("jobs") or {}).items():
                for tube, text in dict(tubes).items():
                    jobs[(str(server), str(tube))] = decode_ids(str(text))
            return cls(
                batch=int(data["batch"]),
                jobs=jobs,
                redelivered=int(data.get("redelivered", 0)),
                lost=int(data.get("lost", 0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"beanpole: the checkpoint holds an offset this reader cannot read: {data!r}"
            ) from e

    def count(self) -> int:
        return sum(len(ids) for ids in self.jobs.values())
