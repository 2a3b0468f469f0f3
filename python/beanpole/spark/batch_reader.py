"""The ``beanpole`` batch reader: the ready jobs of a tube as a table.

``spark.read.format("beanpole").option("servers", ...).option("tube", ...).load()``
plans ``partitionsPerServer`` partitions on every server. Each partition opens its
own connection, watches ``tube`` (or ``tubes``) and reserves with pipelined
``reserve-with-timeout 0`` until none is ready or its share of ``maxJobs`` is reached;
the tube and priority of the jobs come from pipelined ``stats-job``. Rows are those
of :mod:`.rows`.

Once the partition's rows have all been handed on, ``ack`` is applied: ``release``
(the default: back to ready, with the job's priority, so that nothing is lost if
what consumes the rows fails; delete them afterwards with :func:`.ack_rows.ack`),
``delete`` (at most once: a job is gone before the sink has written its row),
``bury``, or ``none`` (the jobs go back to ready when the connection closes). If the
task fails or is stopped before that, the connection closes and the server releases
the jobs. See docs/spark.md.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..client import Client
from ..client.errors import BatchError, NotFoundError
from .instances import instance_of
from .options import QueueOptions
from .rows import ROW_SCHEMA

#: Jobs reserved (and turned into one record batch) per round of pipelined reserves.
CHUNK = 10_000


@dataclass(frozen=True)
class ServerPart(InputPartition):
    """One connection's share of a server: up to ``limit`` jobs (None: every ready one)."""

    server: str
    number: int
    limit: int | None


def plan(opts: QueueOptions) -> list[InputPartition]:
    per = opts.partitions_per_server
    parts: list[InputPartition] = []
    count = len(opts.servers) * per
    for k, server in enumerate(s for s in opts.servers for _ in range(per)):
        limit = None
        if opts.max_jobs is not None:
            # Spread max-jobs over the partitions, the first ones taking the remainder.
            limit = opts.max_jobs // count + (1 if k < opts.max_jobs % count else 0)
        parts.append(ServerPart(server, k % per, limit))
    return parts


def skip_gone(call: Callable[[list[int]], None], ids: list[int]) -> None:
    """Run a pipelined id batch over every id, skipping those the server no longer
    has for us (NOT_FOUND: deleted, or reserved by another worker after a lapse)."""
    while ids:
        try:
            call(ids)
            return
        except BatchError as err:
            if not isinstance(err.reason, NotFoundError):
                raise
            ids = ids[err.index + 1 :]


def _ack(
    client: Client[bytes], ack: str, ids: list[int], priorities: list[int], window: int
) -> None:
    if ack == "delete":
        skip_gone(lambda group: client.delete_many(group, window=window), ids)
        return
    # Release and bury keep each job's priority: one pipelined batch per priority.
    by_priority: dict[int, list[int]] = {}
    for job_id, pri in zip(ids, priorities, strict=True):
        by_priority.setdefault(pri, []).append(job_id)
    for pri, group in by_priority.items():

        def one(g: list[int], p: int = pri) -> None:
            if ack == "release":
                client.release_many(g, priority=p, window=window)
            else:
                client.bury_many(g, priority=p, window=window)

        skip_gone(one, group)


def read_part(opts: QueueOptions, part: ServerPart) -> Iterator[pa.RecordBatch]:
    """Reserve the partition's jobs, yield them, then apply ``ack``."""
    if part.limit == 0:
        return
    client: Client[bytes] = Client(
        part.server, encoding=None, watch=opts.tubes, timeout=opts.timeout
    )
    try:
        instance = instance_of(client)
        ids: list[int] = []
        priorities: list[int] = []
        while part.limit is None or len(ids) < part.limit:
            want = CHUNK if part.limit is None else min(CHUNK, part.limit - len(ids))
            jobs = client.reserve_many(want, 0, window=opts.window)
            if not jobs:
                break
            chunk_ids = [j.id for j in jobs]
            stats = client.stats_job_many(chunk_ids, window=opts.window)
            tubes = [None if s is None else s[0] for s in stats]
            pris = [None if s is None else s[1] for s in stats]
            ids += chunk_ids
            # A job whose stats are gone (its reservation lapsed and another worker took
            # it) is still handed on; the ack below then finds it gone and skips it.
            priorities += [opts.priority if p is None else p for p in pris]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.repeat(pa.scalar(part.server, pa.string()), len(jobs)),
                    pa.repeat(pa.scalar(instance, pa.string()), len(jobs)),
                    pa.array(chunk_ids, pa.int64()),
                    pa.array(tubes, pa.string()),
                    pa.array(pris, pa.int64()),
                    pa.array([j.body for j in jobs], pa.binary()),
                ],
                schema=ROW_SCHEMA,
            )
            if len(jobs) < want:
                break
        if ids and opts.ack != "none":
            _ack(client, opts.ack, ids, priorities, opts.window)
    finally:
        client.close()


class QueueReader(DataSourceReader):
    def __init__(self, opts: QueueOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        return plan(self.opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ServerPart):
            raise TypeError(f"beanpole: unexpected partition {partition!r}")
        return read_part(self.opts, partition)
