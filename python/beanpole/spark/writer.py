"""The ``beanpole`` writer: DataFrame rows to jobs.

``df.write.format("beanpole").option("servers", ...).mode("append").save()`` and
``df.writeStream.format("beanpole")`` run the same task code, :func:`write_batches`:
each Arrow record batch Spark hands over is split by server (by the ``key`` column,
with the rendezvous hashing of ``ShardedClient``, else in round-robin slices) and fed to
``Client.put_arrow``, which reads bodies, priorities, delays, ttrs and tubes straight
from the Arrow buffers and pipelines the puts. Servers are written to concurrently.

A task returns a :class:`JobsWritten` commit message: the jobs it inserted, counted and
listed per server (as runs of consecutive ids, which keeps a million rows' message a few
kilobytes). When a task fails it deletes what it inserted before failing, where
the server can still be reached; the driver's ``abort`` deletes what the tasks that did
finish inserted. Jobs put on a server that went away stay there, and a retried task
puts its rows again: enqueueing is at-least-once (docs/spark.md).

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .. import _core
from ..client import Client
from ..client.errors import BatchError, ClientError, NotFoundError
from . import id_runs
from .options import NAME, U32_MAX, OptionError, QueueOptions

log = logging.getLogger("beanpole")

_TEXT = {"string", "binary", "large_string", "large_binary"}
_SETTINGS = ("priority", "delay", "ttr")


@dataclass
class JobsWritten(WriterCommitMessage):
    """What one task inserted: per server, the job count and the ids as packed runs of
    consecutive ids (:mod:`.id_runs`), so ``abort`` can delete them."""

    counts: dict[str, int] = field(default_factory=dict)
    runs: dict[str, bytes] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def check_schema(schema: StructType) -> None:
    """Refuse, on the driver, a DataFrame the writer cannot turn into jobs."""
    types = {f.name: f.dataType.typeName() for f in schema.fields}
    if "body" not in types:
        raise OptionError(f"{NAME}: the DataFrame needs a body column (binary or string)")
    if types["body"] not in ("binary", "string"):
        raise OptionError(f"{NAME}: column body must be binary or string, not {types['body']}")
    for name in _SETTINGS:
        if name in types and types[name] not in ("byte", "short", "integer", "long"):
            raise OptionError(f"{NAME}: column {name} must be a whole number, not {types[name]}")
    if "tube" in types and types["tube"] != "string":
        raise OptionError(f"{NAME}: column tube must be a string, not {types['tube']}")


def _setting(batch: pa.RecordBatch, name: str, default: int) -> int | pa.Array:
    """A per-row setting as uint32 with nulls taken from the option, or the option."""
    if name not in batch.schema.names:
        return default
    col = batch.column(name)
    if col.null_count:
        col = pc.fill_null(col, pa.scalar(default, col.type))
    if len(col):
        low, high = pc.min_max(col).values()
        if low.as_py() < 0 or high.as_py() > U32_MAX:
            bad = low.as_py() if low.as_py() < 0 else high.as_py()
            raise ValueError(f"{NAME}: column {name} holds {bad}, outside 0..{U32_MAX}")
    return pc.cast(col, pa.uint32())


def _tubes(batch: pa.RecordBatch, default: str) -> pa.Array | None:
    if "tube" not in batch.schema.names:
        return None
    col = batch.column("tube")
    if col.null_count:
        col = pc.fill_null(col, default)
    return col.dictionary_encode()


def _keys(batch: pa.RecordBatch) -> pa.Array | None:
    if "key" not in batch.schema.names:
        return None
    col = batch.column("key")
    if str(col.type) not in _TEXT:
        col = pc.cast(col, pa.string())
    return col


def split(batch: pa.RecordBatch, servers: Sequence[str], first: int) -> list[pa.RecordBatch]:
    """The rows of ``batch`` for each server: by ``key`` (rendezvous hashing, a null key
    going round robin), or without one in contiguous round-robin slices, starting at
    server ``first``."""
    n = len(servers)
    if n == 1:
        return [batch]
    keys = _keys(batch)
    if keys is None:
        size = -(-batch.num_rows // n)
        parts = [batch.slice(0, 0)] * n
        for k in range(n):
            parts[(first + k) % n] = batch.slice(k * size, size)
        return parts
    validity, offsets, data = keys.buffers()
    picks = _core.shard_column(
        offsets,
        data if data is not None else b"",
        str(keys.type).startswith("large"),
        keys.offset,
        len(keys),
        validity if keys.null_count else None,
        list(servers),
        first,
    )
    where = pa.Array.from_buffers(pa.uint32(), len(keys), [None, pa.py_buffer(picks)])
    return [batch.filter(pc.equal(where, k)) for k in range(n)]


class _Task:
    """The connections and the ids of one write task."""

    def __init__(self, opts: QueueOptions) -> None:
        self.opts = opts
        self.clients: dict[str, Client[bytes]] = {}
        self.ids: dict[str, list[pa.Array]] = {s: [] for s in opts.servers}

    def client(self, server: str) -> Client[bytes]:
        c = self.clients.get(server)
        if c is None:
            c = Client(server, encoding=None, use=self.opts.tube, timeout=self.opts.timeout)
            self.clients[server] = c
        return c

    def put(self, server: str, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        opts = self.opts
        body = batch.column("body")
        if body.null_count:
            raise ValueError(f"{NAME}: column body holds a null; every job needs a body")
        client = self.client(server)
        try:
            ids = client.put_arrow(
                body,
                priority=_setting(batch, "priority", opts.priority),
                delay=_setting(batch, "delay", opts.delay),
                ttr=_setting(batch, "ttr", opts.ttr),
                tube=_tubes(batch, opts.tube),
                window=opts.window,
            )
        except BatchError as err:
            # Keep what went in before the failure, so it can be deleted.
            done = [i for i in err.ids if isinstance(i, int)]
            done += [i for _, i in err.after if isinstance(i, int)]
            self.ids[server].append(pa.array(done, pa.uint64()))
            raise
        self.ids[server].append(ids)

    def message(self) -> JobsWritten:
        msg = JobsWritten()
        for server, chunks in self.ids.items():
            ids = pa.concat_arrays(chunks) if chunks else pa.array([], pa.uint64())
            msg.counts[server] = len(ids)
            msg.runs[server] = id_runs.pack(ids)
        return msg

    def close(self) -> None:
        for c in self.clients.values():
            c.close()


def write_batches(opts: QueueOptions, batches: Iterator[pa.RecordBatch]) -> JobsWritten:
    """Put every row of ``batches``; what was inserted, per server. On failure, delete
    what this task inserted (where reachable) and raise."""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        first = ctx.partitionId() if ctx is not None else 0
    except ImportError:  # pragma: no cover - pyspark is there when Spark runs this
        first = 0
    task = _Task(opts)
    n = len(opts.servers)
    pool = ThreadPoolExecutor(max_workers=n) if n > 1 else None
    try:
        for number, batch in enumerate(batches):
            parts = split(batch, opts.servers, (first + number) % n)
            if pool is None:
                task.put(opts.servers[0], parts[0])
                continue
            futures = [
                pool.submit(task.put, s, p) for s, p in zip(opts.servers, parts, strict=True)
            ]
            errors = [f.exception() for f in futures]
            for e in errors:
                if e is not None:
                    raise e
        return task.message()
    except BaseException:
        task.close()
        delete_jobs(task.message(), opts, "failed write task")
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
        task.close()


def delete_jobs(msg: JobsWritten, opts: QueueOptions, why: str) -> int:
    """Delete the jobs a message lists, where the server can be reached; how many
    were deleted. A job already gone (or reserved by a worker) is left alone."""
    deleted = 0
    for server, packed in msg.runs.items():
        if not packed:
            continue
        todo = id_runs.expand(packed)
        try:
            with Client(server, encoding=None, timeout=opts.timeout) as c:
                while todo:
                    try:
                        c.delete_many(todo, window=opts.window)
                        deleted += len(todo)
                        todo = []
                    except BatchError as err:
                        if not isinstance(err.reason, NotFoundError):
                            todo = todo[err.index :]
                            raise
                        deleted += err.index
                        todo = todo[err.index + 1 :]
        except ClientError as err:
            log.warning(
                "%s %s: could not delete %d jobs on %s: %s", NAME, why, len(todo), server, err
            )
    return deleted


def _summary(messages: Sequence[WriterCommitMessage | None]) -> tuple[int, dict[str, int]]:
    per: dict[str, int] = {}
    for m in messages:
        if isinstance(m, JobsWritten):
            for server, n in m.counts.items():
                per[server] = per.get(server, 0) + n
    return sum(per.values()), per


def _commit(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    total, per = _summary(messages)
    detail = ", ".join(f"{s}: {n}" for s, n in per.items())
    log.info("%s %s: %d jobs written (%s)", NAME, what, total, detail)


def _abort(opts: QueueOptions, messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    total, _ = _summary(messages)
    deleted = 0
    for m in messages:
        if isinstance(m, JobsWritten):
            deleted += delete_jobs(m, opts, what)
    log.warning(
        "%s %s aborted: deleted %d of the %d jobs its finished tasks wrote",
        NAME,
        what,
        deleted,
        total,
    )


class QueueWriter(DataSourceArrowWriter):
    """The batch writer (``df.write.format("beanpole")``)."""

    def __init__(self, opts: QueueOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JobsWritten:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(messages, "write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort(self.opts, messages, "write")


class QueueStreamWriter(DataSourceStreamArrowWriter):
    """The streaming writer (``df.writeStream.format("beanpole")``): each micro-batch
    is written as a batch write is."""

    def __init__(self, opts: QueueOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> JobsWritten:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.opts, messages, f"micro-batch {batchId}")


def refuse_overwrite(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            f'{NAME}: a queue cannot be overwritten (jobs are only ever added); use .mode("append")'
        )
