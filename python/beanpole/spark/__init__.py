"""Spark data sources for beanpole (``pip install "beanpole[spark]"``).

``register(spark)`` adds every source to a SparkSession:

* ``beanpole-binlog``: a write-ahead log directory (or a beanstalkd binlog
  directory) as a table, ``spark.read.format("beanpole-binlog").load(DIR)``.
* ``beanpole``: DataFrames to jobs (``df.write`` and ``df.writeStream``), the ready
  jobs of a tube as a table (``spark.read``) and as a stream (``spark.readStream``);
  see docs/spark.md.

``ack(df)`` deletes the jobs a batch read gave once the rows are written (:mod:`.ack_rows`).

Importing :mod:`beanpole` does not import this package, so pyspark and pyarrow
are needed only by those who use it.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Acked", "ack", "register", "source_classes"]


def __getattr__(name: str) -> object:
    # ack needs pyspark; it is imported when first asked for, like the sources.
    if name in ("ack", "Acked"):
        from . import ack_rows as module

        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def source_classes() -> list[type]:
    """Every data source class this package provides, in registration order."""
    from .binlog_source import BinlogDataSource
    from .queue_source import QueueDataSource

    sources: list[type] = [BinlogDataSource, QueueDataSource]
    return sources


def register(spark: SparkSession) -> None:
    """Register every beanpole data source with ``spark``."""
    for source in source_classes():
        spark.dataSource.register(source)
