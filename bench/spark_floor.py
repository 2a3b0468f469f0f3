"""Spark's own floor for a Python data source: what it costs Spark to move rows
between the JVM and Python workers when the source or sink itself costs nothing.

``beanpole-bench-floor`` has the log reader's jobs schema and yields, per partition,
Arrow batches built once and then re-sent, so a query over it measures only what
Spark spends per task and per row (starting the Python task, moving the Arrow data
into the JVM, the sink). bench/spark_bench.py runs it beside the log reader, with as
many partitions and rows as the log reader has, and reports the reader against it.

``beanpole-bench-discard`` is the same for writing: an Arrow writer that counts the
rows Spark hands it and keeps none, run beside the beanpole writer on the same
DataFrame.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from beanpole.spark.binlog_source import JOBS_SCHEMA

NAME = "beanpole-bench-floor"
DISCARD = "beanpole-bench-discard"
BATCH_ROWS = 65_536


class Part(InputPartition):
    def __init__(self, rows: int) -> None:
        self.rows = rows


def batch(rows: int, body_size: int) -> pa.RecordBatch:
    """``rows`` rows of the jobs schema with bodies of ``body_size`` bytes."""
    ids = pa.array(range(rows), pa.int64())
    zeros = pa.array([0] * rows, pa.int64())
    columns = {
        "id": ids,
        "tube": pa.array(["default"] * rows, pa.string()),
        "state": pa.array(["ready"] * rows, pa.string()),
        "priority": zeros,
        "delay": zeros,
        "ttr": zeros,
        "body": pa.array([b"x" * body_size] * rows, pa.binary()),
        "reserves": zeros,
        "timeouts": zeros,
        "releases": zeros,
        "buries": zeros,
        "kicks": zeros,
        "segment": zeros,
    }
    return pa.RecordBatch.from_arrays(list(columns.values()), names=list(columns))


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, body_size: int) -> None:
        self.rows, self.partitions_n, self.body_size = rows, partitions, body_size

    def partitions(self) -> Sequence[InputPartition]:
        each, extra = divmod(self.rows, self.partitions_n)
        return [Part(each + (i < extra)) for i in range(self.partitions_n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        rows = partition.rows
        full = batch(min(rows, BATCH_ROWS), self.body_size)
        while rows > 0:
            n = min(rows, BATCH_ROWS)
            yield full if n == full.num_rows else full.slice(0, n)
            rows -= n


class FloorDataSource(DataSource):
    """Options: ``rows``, ``partitions``, ``body-size``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return JOBS_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        o = self.options
        return FloorReader(int(o["rows"]), int(o["partitions"]), int(o.get("body-size", 100)))


class Counted(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class DiscardWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return Counted(sum(b.num_rows for b in iterator))


class DiscardDataSource(DataSource):
    """A sink that takes every row and keeps none."""

    @classmethod
    def name(cls) -> str:
        return DISCARD

    def writer(self, schema: Any, overwrite: bool) -> DiscardWriter:
        return DiscardWriter()


def register(spark: Any) -> None:
    """Register the floor source and sink; their code travels to the workers by value
    (the bench directory need not be on their path)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FloorDataSource)
    spark.dataSource.register(DiscardDataSource)
