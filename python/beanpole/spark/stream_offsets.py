"""Offsets of the streaming reader: each one names the jobs of its micro-batch.

An offset is the JSON dict Spark writes to the checkpoint's offset log::

    {"batch": 7,
     "jobs": {"h1:11300": {"emails": "101-2100,2203"}},
     "instances": {"h1:11300": "5c0a3e1f9b2d4e67"},
     "redelivered": 0, "lost": 0, "orphaned": 0}

``batch`` counts the reader's micro-batches (0 is the initial offset, which names no
job). ``jobs`` lists, per server and tube, the ids reserved for that batch, as
ascending ranges ``first-last`` and single ids separated by commas: ids put in a row
come out as one range, so the log stays small; at worst a batch of N jobs costs about
8 bytes per job. ``instances`` names, per server, the instance the ids belong to: the
``id`` of its ``stats``, which beanstalkd draws at every start and beanpole keeps with
its log directory (``-b``), so it changes exactly when job ids start over. The ids are
deleted or replayed only on that instance. ``redelivered``, ``lost`` and ``orphaned``
are the query's running counts of jobs that may have been delivered twice (see
docs/spark.md): read again by a replayed batch, whose reservation ran out before the
delete, and named by the checkpoint on an instance that is gone (left alone).

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
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
    #: server -> the instance its ids belong to.
    instances: dict[str, str] = field(default_factory=dict)
    redelivered: int = 0
    lost: int = 0
    orphaned: int = 0

    def to_json(self) -> dict[str, Any]:
        jobs: dict[str, dict[str, str]] = {}
        for (server, tube), ids in sorted(self.jobs.items()):
            if ids:
                jobs.setdefault(server, {})[tube] = encode_ids(ids)
        return {
            "batch": self.batch,
            "jobs": jobs,
            "instances": {s: i for s, i in sorted(self.instances.items()) if s in jobs},
            "redelivered": self.redelivered,
            "lost": self.lost,
            "orphaned": self.orphaned,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Offset:
        try:
            jobs: JobMap = {}
            for server, tubes in dict(data.get("jobs") or {}).items():
                for tube, text in dict(tubes).items():
                    jobs[(str(server), str(tube))] = decode_ids(str(text))
            instances = {str(s): str(i) for s, i in dict(data.get("instances") or {}).items()}
            return cls(
                batch=int(data["batch"]),
                jobs=jobs,
                instances=instances,
                redelivered=int(data.get("redelivered", 0)),
                lost=int(data.get("lost", 0)),
                orphaned=int(data.get("orphaned", 0)),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"beanpole: the checkpoint holds an offset this reader cannot read: {data!r}"
            ) from e

    def count(self) -> int:
        return sum(len(ids) for ids in self.jobs.values())

    def counters(self) -> tuple[int, int, int]:
        """The running counts: (redelivered, lost, orphaned)."""
        return self.redelivered, self.lost, self.orphaned


def committed(checkpoint: str, servers: Sequence[str]) -> Offset | None:
    """The end offset of the last batch the query's sink has committed, read from the
    checkpoint directory Spark keeps (``commits/N`` once batch N is in the sink;
    ``offsets/N`` holds the end offset of every source of batch N, one JSON line each
    after the log's version and metadata lines); None when there is none yet. Of the
    offsets, the one that is this reader's shape and names only ``servers`` is taken."""
    try:
        names = os.listdir(os.path.join(checkpoint, "commits"))
    except FileNotFoundError:
        return None
    done = [int(n) for n in names if n.isdigit()]
    if not done:
        return None
    path = os.path.join(checkpoint, "offsets", str(max(done)))
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines[2:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "batch" in data and "jobs" in data:
            offset = Offset.from_json(data)
            if {server for server, _ in offset.jobs} <= set(servers):
                return offset
    return None
