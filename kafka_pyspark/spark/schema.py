"""The fixed read schema (API.md "Read schema"), as Spark and as Arrow types."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
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
