"""The ``beanpole-binlog`` data source: a log directory as a table.

``spark.read.format("beanpole-binlog").load(DIR)`` gives the jobs the log holds
as a restart would see them; ``option("records", "true")`` gives every record;
``option("format", "beanstalkd")`` reads a beanstalkd binlog directory. There is
one partition per segment (per ``binlog.N`` file for beanstalkd). The decoding is
done in Rust (``beanpole._core.binlog_table_*``), which hands back each column as
Arrow buffers; they are wrapped here without a Python object per row.

How the live set is worked out one segment at a time is described in
``rust/engine/src/wal/table.rs`` and docs/spark.md: the driver reads the directory
once to plan, and each segment's task gets the few records of later segments that
change its jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .. import _core

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

_TYPES = {"int64": pa.int64(), "string": pa.string(), "binary": pa.binary()}
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def _flag(options: dict[str, str], name: str) -> bool:
    value = str(options.get(name, "")).strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{NAME}: option {name} must be true or false, not {value!r}")


@dataclass(frozen=True)
class Settings:
    """The options, checked."""

    path: str
    records: bool
    beanstalkd: bool

    @classmethod
    def from_options(cls, options: dict[str, str]) -> Settings:
        path = options.get("path")
        if not path:
            raise ValueError(f"{NAME}: give the log directory: .load(DIR)")
        fmt = str(options.get("format", "beanpole")).strip().lower()
        if fmt not in ("beanpole", "beanstalkd"):
            raise ValueError(f"{NAME}: option format must be beanpole or beanstalkd, not {fmt!r}")
        records = _flag(options, "records")
        if records and fmt == "beanstalkd":
            raise ValueError(
                f"{NAME}: records mode reads beanpole logs only; for a beanstalkd directory "
                "read the jobs, or convert it first with `beanpole binlog import`"
            )
        return cls(path=str(path), records=records, beanstalkd=fmt == "beanstalkd")


@dataclass(frozen=True)
class SegmentPart(InputPartition):
    """One segment of a beanpole log, up to where the plan saw its records end."""

    seq: int
    end: int
    later: bytes
    now_ns: int


@dataclass(frozen=True)
class BeanstalkdPart(InputPartition):
    """One ``binlog.N`` file of a beanstalkd directory."""

    file: str
    now_ns: int


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


def plan(settings: Settings) -> list[InputPartition]:
    """The partitions of a read, one per segment holding records (or per file)."""
    now = time.time_ns()
    if settings.beanstalkd:
        files, warnings = _core.binlog_table_beanstalkd_plan(settings.path)
        parts: list[InputPartition] = [BeanstalkdPart(f, now) for f in files]
    else:
        segments, warnings = _core.binlog_table_plan(settings.path)
        parts = [SegmentPart(seq, end, later, now) for seq, end, later in segments]
    for w in warnings:
        log.warning("%s %s: %s", NAME, settings.path, w)
    return parts


def read_part(settings: Settings, part: InputPartition) -> pa.RecordBatch:
    """Decode one partition into one RecordBatch."""
    if isinstance(part, BeanstalkdPart):
        columns = _core.binlog_table_beanstalkd_jobs(settings.path, part.file, part.now_ns)
    elif not isinstance(part, SegmentPart):
        raise TypeError(f"{NAME}: unexpected partition {part!r}")
    elif settings.records:
        columns = _core.binlog_table_records(settings.path, part.seq, part.end)
    else:
        columns = _core.binlog_table_jobs(
            settings.path, part.seq, part.end, part.later, part.now_ns
        )
    return to_batch(columns)


class BinlogReader(DataSourceReader):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        return plan(self.settings)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        batch = read_part(self.settings, partition)
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
