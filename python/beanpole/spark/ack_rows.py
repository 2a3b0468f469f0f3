"""Deleting the jobs a batch read gave, once what was made of them is safe.

A batch read (``spark.read.format("beanpole")``) releases the jobs it read by default
(``ack`` ``release``): Spark has no signal to a source that the query's sink has
written its rows, and a job deleted before that is lost if the write fails. So taking
jobs off the queue is a second step, after the write succeeded::

    jobs = spark.read.format("beanpole").option("servers", S).load()
    jobs.write.parquet(OUT)
    beanpole.spark.ack(spark.read.parquet(OUT))     # what was written

:func:`ack` deletes, in Spark tasks, the jobs named by a DataFrame's ``server``,
``instance`` and ``id`` columns, each on its server only while that server is still
the instance the row was read from (see :mod:`.instances`). Give it what the sink
wrote, or a DataFrame that was cached or checkpointed before the write: a reader's
DataFrame that is evaluated again reads the queue again, and would name other jobs.
That case is refused.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..client import Client
from .instances import delete_ids, instance_of
from .options import NAME, OptionError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The columns that name a job.
COLUMNS = ("server", "instance", "id")
#: How a scan of the ``beanpole`` source shows in a line of Spark's plan.
_SCAN = re.compile(rf"RelationV2\[.*\] {NAME}$", re.MULTILINE)


@dataclass(frozen=True)
class Acked:
    """What :func:`ack` did."""

    #: Jobs deleted.
    deleted: int
    #: Jobs not found: deleted already, or reserved by a worker at the time.
    gone: int
    #: Jobs named on an instance the server no longer is (it restarted without its
    #: log, so their ids name other jobs): left alone.
    orphaned: int


def ack(df: DataFrame, *, window: int = 2000, timeout: float | None = 30.0) -> Acked:
    """Delete the jobs named by ``df``'s ``server``, ``instance`` and ``id`` columns
    (rows a batch read gave, as the sink wrote them), pipelined, in Spark tasks."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise OptionError(
            f"{NAME}: ack needs the columns {', '.join(COLUMNS)} of the rows read "
            f"(missing: {', '.join(missing)})"
        )
    rows = df.select(*COLUMNS)
    if _reads_the_queue(rows):
        raise OptionError(
            f"{NAME}: ack was given a DataFrame that reads the queue again when "
            "evaluated; give it what the sink wrote (spark.read.parquet(OUT)), or "
            ".cache()/.localCheckpoint() the rows before writing them"
        )
    work = functools.partial(_ack_part, window=window, timeout=timeout)
    done = rows.rdd.mapPartitions(work).collect()
    return Acked(
        deleted=sum(d for d, _, _ in done),
        gone=sum(g for _, g, _ in done),
        orphaned=sum(o for _, _, o in done),
    )


def _reads_the_queue(df: DataFrame) -> bool:
    """Whether evaluating ``df`` would scan the ``beanpole`` source (not a cache of it).
    ``df`` must be a new Dataset (its plan's cache lookup is done once, when first
    asked for)."""
    try:
        plan = str(df._jdf.queryExecution().withCachedData().toString())
    except Exception:  # Spark Connect: no JVM plan to look at
        return False
    return _SCAN.search(plan) is not None


def _ack_part(
    rows: Iterator[tuple[str | None, str | None, int | None]],
    *,
    window: int,
    timeout: float | None,
) -> Iterator[tuple[int, int, int]]:
    """One partition's deletes; its counts (deleted, gone, orphaned)."""
    named: dict[tuple[str, str], list[int]] = {}
    for server, instance, job in rows:
        if server is not None and job is not None:
            named.setdefault((server, instance or ""), []).append(int(job))
    deleted = gone = orphaned = 0
    for (server, instance), ids in sorted(named.items()):
        ids = sorted(set(ids))
        with Client(server, encoding=None, timeout=timeout) as client:
            if instance_of(client) != instance:
                orphaned += len(ids)
                continue
            for i in range(0, len(ids), window * 10):
                chunk = ids[i : i + window * 10]
                missing = len(delete_ids(client, chunk))
                gone += missing
                deleted += len(chunk) - missing
    yield deleted, gone, orphaned
