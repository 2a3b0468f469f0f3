"""Format ``beanpole`` on ``readStream``: the streaming reader's data source.

``spark.readStream.format("beanpole").option("servers", "h1:11300").option("tube",
"emails").load()`` gives rows ``server``, ``id``, ``tube``, ``priority``, ``body``; see
docs/spark.md for the options and the delivery guarantees, and
:mod:`beanpole.spark.stream_reader` for how a micro-batch goes.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.types import StructType

from .stream_options import NAME, QUEUE_SCHEMA, StreamSettings
from .stream_reader import BeanpoleStreamReader


class BeanpoleStreamSource(DataSource):
    """``spark.readStream.format("beanpole")``."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.stream_settings = StreamSettings.from_options(dict(options))

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return QUEUE_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BeanpoleStreamReader(self.stream_settings)
