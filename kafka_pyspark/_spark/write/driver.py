"""The driver's side of a Spark write (the writers' ``__init__``, which Spark runs at
``save()``/``start()`` and per micro-batch): the DataFrame's schema checked as the writer's
columns, options parsed, the cluster resolved into the :class:`~kafka_pyspark._write.WritePlan`
Spark pickles to every task."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from kafka_pyspark._options.write_columns import (
    BINARY,
    INT,
    OTHER,
    STRING,
    Column,
    ColumnLayout,
    resolve_layout,
)
from kafka_pyspark._options.write_options import WriteOptions, parse_write_options
from kafka_pyspark._write import WritePlan, resolve_plan

__all__ = ["build_plan", "resolve_columns", "spark_columns"]

_INT_TYPES = (ByteType, ShortType, IntegerType, LongType)


def spark_columns(schema: StructType) -> list[Column]:
    """A Spark schema as the writer's :class:`Column` rows."""
    out = []
    for field in schema.fields:
        t = field.dataType
        kind = (STRING if isinstance(t, StringType) else BINARY if isinstance(t, BinaryType)
                else INT if isinstance(t, _INT_TYPES) else OTHER)
        out.append(Column(field.name, kind, t.simpleString()))
    return out


def resolve_columns(schema: StructType, options: WriteOptions) -> ColumnLayout:
    """Check the DataFrame's schema against docs/writing.md "Columns"."""
    return resolve_layout(spark_columns(schema), options)


def build_plan(options: Mapping[str, str], schema: StructType) -> WritePlan:
    """Driver side: check options and columns, then resolve the cluster (bounded I/O)."""
    from kafka_pyspark._cluster import Cluster

    wopts, copts = parse_write_options(options)
    layout = resolve_columns(schema, wopts)
    with Cluster(copts) as cluster:
        return resolve_plan(cluster, wopts, layout, copts)
