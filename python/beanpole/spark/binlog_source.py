"""The ``beanpole-binlog`` data source: a log directory as a table.

``spark.read.format("beanpole-binlog").load(DIR)`` gives the jobs the log holds
as a restart would see them; ``option("records", "true")`` gives every record;
``option("format", "beanstalkd")`` reads a beanstalkd binlog directory. Each
partition reads whole consecutive segments (``binlog.N`` files for beanstalkd),
packed as Spark packs small files into a partition (see :func:`pack`). The decoding is
done in Rust (``beanpole._core.binlog_table_*``), which hands back each column as
Arrow buffers; they are wrapped here without a Python object per row.

How the live set is worked out one segment at a time is described in
``rust/engine/src/wal/table.rs`` and docs/spark.md: the driver reads the directory
once to plan, and each segment's task gets the few records of later segments that
change its jobs.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .. import _core
from .options import Options

log = logging.getLogger("beanpole")

NAME = "beanpole-binlog"

#: Rows of the default (jobs) mode.
JOBS_SCHEMA = (
    "id bigint, tube string, state string, priority bigint, delay bigint, ttr bigint, "
    "body binary, reserves bigint, timeouts bigint, releases bigint, buries bigint, "
    "kicks bigint, segment bigint"
)
#: Rows of ``option("records", "true")``.
RECORDS_SCHEMA = (
    "segment bigint, offset bigint, kind string, id bigint, tube string, state string, "
    "priority bigint, delay bigint, ttr bigint, body_size bigint"
)

#: Defaults of ``max-partition-bytes`` and of what a segment costs to open beyond its
#: bytes, Spark's own for files (``spark.sql.files.maxPartitionBytes``,
#: ``spark.sql.files.openCostInBytes``): a task costs Spark tens of milliseconds,
#: so small segments are read several to a task.
MAX_PARTITION_BYTES = 128 * 1024 * 1024
OPEN_COST = 4 * 1024 * 1024

_TYPES = {"int64": pa.int64(), "string": pa.string(), "binary": pa.binary()}
@dataclass(frozen=True)
class Settings:
    """The options, checked."""

    path: str
    records: bool
    beanstalkd: bool
    #: A partition holds no more bytes than this, unless one segment alone is larger.
    max_partition_bytes: int = MAX_PARTITION_BYTES
    #: Segments are spread over at least this many partitions (when there are as many).
    min_partitions: int = 1

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Settings:
        opts = Options(NAME, options)
        path = opts.text("path")
        if not path:
            raise opts.fail("give the log directory: .load(DIR)")
        fmt = opts.choice("format", ("beanpole", "beanstalkd"), "beanpole")
        records = opts.flag("records")
        if records and fmt == "beanstalkd":
            raise opts.fail(
                "records mode reads beanpole logs only; for a beanstalkd directory "
                "read the jobs, or convert it first with `beanpole binlog import`"
            )
        most = 2**62
        return cls(
            path=path,
            records=records,
            beanstalkd=fmt == "beanstalkd",
            max_partition_bytes=opts.whole(
                "maxPartitionBytes", MAX_PARTITION_BYTES, 1, most, aliases=("max-partition-bytes",)
            ),
            min_partitions=opts.whole(
                "minPartitions", os.cpu_count() or 1, 1, most, aliases=("min-partitions",)
            ),
        )


@dataclass(frozen=True)
class SegmentPart:
    """One segment of a beanpole log, up to where the plan saw its records end."""

    seq: int
    end: int
    later: bytes
    now_ns: int


@dataclass(frozen=True)
class BeanstalkdPart(InputPartition):
    """``binlog.N`` files of a beanstalkd directory, read together."""

    files: tuple[str, ...]
    now_ns: int


@dataclass(frozen=True)
class PackedPart(InputPartition):
    """What one task reads: consecutive segments, one batch each, in log order."""

    segments: tuple[SegmentPart, ...]


def pack(sizes: Sequence[int], min_partitions: int, max_bytes: int) -> list[range]:
    """Split items of these sizes, in order, into consecutive groups of about equal
    bytes, as Spark packs files: each item counts OPEN_COST more than its size; there
    are enough groups for none to pass ``max_bytes`` (one item alone may) and at least
    ``min_partitions`` (at most one per item), so every core has a share."""
    if not sizes:
        return []
    weights = [max(size, 0) + OPEN_COST for size in sizes]
    groups = max(math.ceil(sum(weights) / max_bytes), min(min_partitions, len(sizes)))
    while True:
        out = _split(weights, min(groups, len(sizes)))
        if groups >= len(sizes) or all(
            len(g) == 1 or sum(weights[i] for i in g) <= max_bytes for g in out
        ):
            return out
        groups += 1


def _split(weights: Sequence[int], groups: int) -> list[range]:
    """Consecutive groups of about equal weight: an item belongs to the group its
    middle falls in."""
    target = sum(weights) / groups
    out: list[range] = []
    start, before, current = 0, 0, 0
    for i, w in enumerate(weights):
        group = min(groups - 1, int((before + w / 2) // target))
        if group != current and i > start:
            out.append(range(start, i))
            start = i
        current = group
        before += w
    out.append(range(start, len(weights)))
    return out


Column = tuple[str, str, int, int, bytes | None, bytes | None, bytes]


def to_batch(columns: Sequence[Column]) -> pa.RecordBatch:
    """Wrap the column buffers from Rust as a RecordBatch (no copy, no row objects)."""
    arrays = []
    fields = []
    for name, kind, length, nulls, validity, offsets, values in columns:
        typ = _TYPES[kind]
        bufs = [None if validity is None else pa.py_buffer(validity)]
        if offsets is not None:
            bufs.append(pa.py_buffer(offsets))
        bufs.append(pa.py_buffer(values))
        arrays.append(pa.Array.from_buffers(typ, length, bufs, null_count=nulls))
        fields.append(pa.field(name, typ))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _file_size(path: str, name: str) -> int:
    try:
        return os.stat(os.path.join(path, name)).st_size
    except OSError:
        return 0


def plan(settings: Settings) -> list[InputPartition]:
    """The partitions of a read: the segments holding records (or the files holding
    live jobs), packed into consecutive groups."""
    now = time.time_ns()
    parts: list[InputPartition]
    if settings.beanstalkd:
        files, warnings = _core.binlog_table_beanstalkd_plan(settings.path)
        sizes = [_file_size(settings.path, f) for f in files]
        groups = pack(sizes, settings.min_partitions, settings.max_partition_bytes)
        parts = [BeanstalkdPart(tuple(files[i] for i in g), now) for g in groups]
    else:
        planned, warnings = _core.binlog_table_plan(settings.path)
        segments = [SegmentPart(seq, end, later, now) for seq, end, later in planned]
        groups = pack(
            [s.end for s in segments], settings.min_partitions, settings.max_partition_bytes
        )
        parts = [PackedPart(tuple(segments[i] for i in g)) for g in groups]
    for w in warnings:
        log.warning("%s %s: %s", NAME, settings.path, w)
    return parts


def read_segment(settings: Settings, part: SegmentPart) -> pa.RecordBatch:
    """Decode one segment into one RecordBatch."""
    if settings.records:
        columns = _core.binlog_table_records(settings.path, part.seq, part.end)
    else:
        columns = _core.binlog_table_jobs(
            settings.path, part.seq, part.end, part.later, part.now_ns
        )
    return to_batch(columns)


def read_part(settings: Settings, part: InputPartition) -> Iterator[pa.RecordBatch]:
    """Decode one partition: a RecordBatch per segment (or one for beanstalkd files)."""
    if isinstance(part, BeanstalkdPart):
        columns = _core.binlog_table_beanstalkd_jobs(settings.path, list(part.files), part.now_ns)
        yield to_batch(columns)
    elif isinstance(part, PackedPart):
        for segment in part.segments:
            yield read_segment(settings, segment)
    else:
        raise TypeError(f"{NAME}: unexpected partition {part!r}")


class BinlogReader(DataSourceReader):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        return plan(self.settings)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for batch in read_part(self.settings, partition):
            if batch.num_rows:
                yield batch


class BinlogDataSource(DataSource):
    """``spark.read.format("beanpole-binlog")``; see docs/spark.md for the options."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.settings = Settings.from_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return RECORDS_SCHEMA if self.settings.records else JOBS_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BinlogReader(self.settings)
