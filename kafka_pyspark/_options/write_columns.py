"""The writer's input columns: which DataFrame column is the value, key, topic, broker and
partition (docs/writing.md "Columns"), checked against the schema on the driver. Pure: the
schema comes as :class:`Column` rows (a Spark schema's from
:func:`kafka_pyspark._spark.write.driver.spark_columns`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kafka_pyspark._options.write_options import WriteOptions
from kafka_pyspark.errors import OptionError, SchemaError

__all__ = ["BINARY", "INT", "OTHER", "STRING", "Column", "ColumnLayout", "resolve_layout"]

#: what the writer makes of a column's type (:attr:`Column.kind`): Spark's string (any
#: collation), binary, any integer width (byte, short, int, long), anything else
STRING, BINARY, INT, OTHER = "string", "binary", "int", "other"
_BYTES_KINDS = (STRING, BINARY)
_COLUMNS = ("value", "key", "topic", "broker", "partition")


class Column(NamedTuple):
    """One input column: its name, its type's :data:`kind` and the type as errors name it
    (Spark's ``simpleString``: ``binary``, ``bigint``, ``array<int>``...)."""

    name: str
    kind: str
    type_name: str


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


def resolve_layout(columns: Sequence[Column], options: WriteOptions) -> ColumnLayout:
    """Check the input's columns against docs/writing.md "Columns"."""
    found: dict[str, str] = {}
    for field in columns:
        lname = field.name.lower()
        if lname not in _COLUMNS:
            continue
        if lname in found:
            raise SchemaError(
                f"columns {found[lname]!r} and {field.name!r} both match {lname!r} "
                "(names are case-insensitive)"
            )
        found[lname] = field.name
        kind, t = field.kind, field.type_name
        if lname in ("value", "key") and kind not in _BYTES_KINDS:
            raise SchemaError(f"column {field.name!r} must be binary or string, not {t}")
        if lname == "topic" and kind != STRING:
            raise SchemaError(f"column {field.name!r} must be string, not {t}")
        if lname in ("broker", "partition") and kind != INT:
            raise SchemaError(f"column {field.name!r} must be int, not {t}")
    if "value" not in found:
        names = ", ".join(repr(f.name) for f in columns) or "none"
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
