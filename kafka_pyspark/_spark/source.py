"""The ``kafka07`` DataSource: the one class Spark sees. Each mode lives in its own module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kafka_pyspark._spark import worker_gc
from kafka_pyspark._spark.schema import READ_SCHEMA, SEGMENT_READ_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSourceReader,
        DataSourceStreamReader,
        DataSourceStreamWriter,
        DataSourceWriter,
    )


class Kafka07DataSource(DataSource):
    """Read from and write to Apache Kafka 0.7 (``spark.read.format("kafka07")``).

    Spark calls these methods in its Python workers (on the driver's side: planning a read or
    a write), which it reuses and collects after every call: each settles the worker's heap
    first (:func:`~kafka_pyspark._spark.worker_gc.settle`)."""

    @classmethod
    def name(cls) -> str:
        return "kafka07"

    def schema(self) -> StructType:
        worker_gc.settle()
        # Spark calls schema() at load() for spark.read and spark.readStream (never for
        # writes): check the read options here so a bad one fails at load(), not at the action.
        from kafka_pyspark._options import validate_read_options
        from kafka_pyspark._options.catalog_table import refuse_catalog_table
        from kafka_pyspark._options.segment_path import has_path, parse_segment_options

        refuse_catalog_table(self.options)  # SQL: CREATE TABLE ... USING kafka07 (docs/sql.md)
        if has_path(self.options):  # segment files, no broker (docs/segments.md)
            parse_segment_options(self.options)
            return SEGMENT_READ_SCHEMA
        validate_read_options(self.options)
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        worker_gc.settle()
        from kafka_pyspark._options.catalog_table import refuse_catalog_table
        from kafka_pyspark._options.segment_path import has_path
        from kafka_pyspark._spark.read.batch import Kafka07BatchReader

        refuse_catalog_table(self.options)  # SELECT from a catalog table (docs/sql.md)
        if has_path(self.options):
            from kafka_pyspark._spark.read.segment_files import SegmentBatchReader

            return SegmentBatchReader(dict(self.options), schema)
        return Kafka07BatchReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        worker_gc.settle()
        from kafka_pyspark._options.segment_path import has_path
        from kafka_pyspark.errors import OptionError

        if has_path(self.options):
            raise OptionError("path", "segment files are read in batch (spark.read); a stream "
                              "needs a live cluster (zk.connect or broker.list)")
        from kafka_pyspark._spark.compat import ADMISSION_CONTROL

        if not ADMISSION_CONTROL:
            from kafka_pyspark._spark.stream.legacy_reader import Kafka07LegacyStreamReader

            return Kafka07LegacyStreamReader(dict(self.options), schema)
        from kafka_pyspark._spark.stream.reader import Kafka07StreamReader

        return Kafka07StreamReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        worker_gc.settle()
        from kafka_pyspark._options.catalog_table import refuse_catalog_table
        from kafka_pyspark._spark.write import Kafka07BatchWriter

        refuse_catalog_table(self.options)  # INSERT INTO a catalog table (docs/sql.md)
        return Kafka07BatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        worker_gc.settle()
        from kafka_pyspark._spark.write import Kafka07StreamWriter

        return Kafka07StreamWriter(dict(self.options), schema, overwrite)
