"""The fixed read schema (docs/reading.md "Schema"), as Spark and as Arrow types."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

READ_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("broker", IntegerType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("next_offset", LongType(), False),
        StructField("inner_index", IntegerType(), False),
        StructField("compression", StringType(), False),
        StructField("value", BinaryType(), True),
    ]
)

ARROW_READ_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), False),
        pa.field("broker", pa.int32(), False),
        pa.field("partition", pa.int32(), False),
        pa.field("offset", pa.int64(), False),
        pa.field("next_offset", pa.int64(), False),
        pa.field("inner_index", pa.int32(), False),
        pa.field("compression", pa.string(), False),
        pa.field("value", pa.binary(), True),
    ]
)

#: The read schema with ``path`` (segment files): the live read schema, then the columns of
#: Kafka's later formats (docs/segments.md): null / -1 where the file's format lacks them.
SEGMENT_READ_SCHEMA = StructType(
    [
        *READ_SCHEMA.fields,
        StructField("key", BinaryType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestamp_type", IntegerType(), False),
        StructField(
            "headers",
            ArrayType(
                StructType(
                    [
                        StructField("key", StringType(), False),
                        StructField("value", BinaryType(), True),
                    ]
                ),
                containsNull=False,
            ),
            True,
        ),
    ]
)

