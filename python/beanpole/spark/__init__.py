"""Spark data sources for beanpole (``pip install "beanpole[spark]"``).

``register(spark)`` adds every source to a SparkSession:

* ``beanpole-binlog``: a write-ahead log directory (or a beanstalkd binlog
  directory) as a table, ``spark.read.format("beanpole-binlog").load(DIR)``.
* ``beanpole``: on ``readStream``, jobs reserved from tubes as a stream (the writer
  and the batch reader of the same format are to come; see docs/spark.md).

Importing :mod:`beanpole` does not import this package, so pyspark and pyarrow
are needed only by those who use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["register", "source_classes"]


def source_classes() -> list[type]:
    """Every data source class this package provides, in registration order."""
    from .binlog_source import BinlogDataSource
    from .stream_source import BeanpoleStreamSource

    sources: list[type] = [BinlogDataSource, BeanpoleStreamSource]
    # The writer and the queue readers (format "beanpole": DataFrames to jobs,
    # batch and streaming reads of a tube) are built on beanpole.Client and are
    # added here as one more class: a DataSource whose writer(), streamWriter(),
    # reader() and streamReader() cover items 2 to 4 of docs/spark.md.
    return sources


def register(spark: SparkSession) -> None:
    """Register every beanpole data source with ``spark``."""
    for source in source_classes():
        spark.dataSource.register(source)
