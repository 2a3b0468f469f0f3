"""The ``beanpole`` data source: DataFrames to jobs and jobs to DataFrames.

* ``df.write.format("beanpole")`` and ``df.writeStream.format("beanpole")``: the
  writers of :mod:`.writer`;
* ``spark.read.format("beanpole")``: the batch reader of :mod:`.batch_reader`;
* ``spark.readStream.format("beanpole")``: the streaming reader of
  :mod:`.stream_reader` (its own options in :mod:`.stream_options`).

The options (:mod:`.options`) are checked when the source is made, on the driver, so
a bad one fails the query at once with one message. See docs/spark.md.

Spark layer, beside the server: imports the clients, the settings and the native module
at most; nothing of ``beanpole.server``, ``.ops`` or ``.cli``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .batch_reader import QueueReader
from .options import NAME, QueueOptions
from .rows import SCHEMA
from .stream_options import StreamSettings
from .stream_reader import BeanpoleStreamReader
from .writer import QueueStreamWriter, QueueWriter, check_schema, refuse_overwrite


class QueueDataSource(DataSource):
    """``format("beanpole")``; see docs/spark.md for the options."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.opts = QueueOptions.from_options(options)
        # Checked here too, so that a bad streaming option fails .load() at once; the
        # writers and the batch reader ignore these.
        self.stream_settings = StreamSettings.from_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        refuse_overwrite(overwrite)
        check_schema(schema)
        return QueueWriter(self.opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        refuse_overwrite(overwrite)
        check_schema(schema)
        return QueueStreamWriter(self.opts)

    def reader(self, schema: StructType) -> DataSourceReader:
        return QueueReader(self.opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BeanpoleStreamReader(self.stream_settings)

