"""The writer's input columns: which DataFrame column is the value, key, topic, broker and
partition (docs/writing.md "Columns"), checked against the schema on the driver."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from kafka_pyspark._spark.options.write_options import WriteOptions
from kafka_pyspark.errors import OptionError, SchemaError

__all__ = ["ColumnLayout", "resolve_columns"]

_BYTES_TYPES = (StringType, BinaryType)
_INT_TYPES = (ByteType, ShortType, IntegerType, LongType)
_COLUMNS = ("value", "key", "topic", "broker", "partition")


@dataclass(frozen=True)
class ColumnLayout:
    """Where the writer finds its inputs: the actual column names (Spark matches names
    case-insensitively), or None for an absent optional column. Other columns are ignored,
    as Spark's own Kafka sink does (so a DataFrame read from kafka07 can be written back)."""

    value: str
    key: str | None = None
    topic: str | None = None
    broker: str | None = None
    partition: str | None = None
    partitioner: str = "random"  # effective: "hash" (key column used) or "random"


def _type_name(t: DataType) -> str:
    return t.simpleString()


def resolve_columns(schema: StructType, options: WriteOptions) -> ColumnLayout:
    """Check the DataFrame's schema against docs/writing.md "Columns"."""
    found: dict[str, str] = {}
    for field in schema.fields:
        lname = field.name.lower()
        if lname not in _COLUMNS:
            continue
        if lname in found:
            raise SchemaError(
                f"columns {found[lname]!r} and {field.name!r} both match {lname!r} "
                "(names are case-insensitive)"
            )
        found[lname] = field.name
        t = field.dataType
        if lname in ("value", "key") and not isinstance(t, _BYTES_TYPES):
            raise SchemaError(
                f"column {field.name!r} must be binary or string, not {_type_name(t)}"
            )
        if lname == "topic" and not isinstance(t, StringType):
            raise SchemaError(f"column {field.name!r} must be string, not {_type_name(t)}")
        if lname in ("broker", "partition") and not isinstance(t, _INT_TYPES):
            raise SchemaError(f"column {field.name!r} must be int, not {_type_name(t)}")
    if "value" not in found:
        names = ", ".join(repr(f.name) for f in schema.fields) or "none"
        raise SchemaError(f"kafka07 needs a 'value' column (binary or string); columns: {names}")
    if ("broker" in found) != ("partition" in found):
        have, missing = ("broker", "partition") if "broker" in found else ("partition", "broker")
        raise SchemaError(
            f"column {found[have]!r} needs a {missing!r} column too: an explicit target is "
            "both broker and partition, or neither"
        )
    if "topic" not in found and options.topic is None:
        raise OptionError(
            "topic", "no target topic: set option('topic', ...) or add a 'topic' column"
        )
    if options.partitioner == "hash" and "key" not in found:
        raise OptionError("partitioner", "'hash' needs a 'key' column")
    if options.partitioner is not None:
        partitioner = options.partitioner
    else:
        partitioner = "hash" if "key" in found else "random"
    return ColumnLayout(
        value=found["value"],
        key=found.get("key") if partitioner == "hash" else None,
        topic=found.get("topic"),
        broker=found.get("broker"),
        partition=found.get("partition"),
        partitioner=partitioner,
    )
