"""What Spark's planner processes import for a session's first kafka07 call.

Spark runs ``schema()``, ``reader()``/``partitions()``, ``writer()`` and a write's ``commit`` each
in a Python process of its own, new at the first call of a session; every module they import
is paid there (bench/first_row.py). What only executors or segment files need stays out:
``kafka_pyspark._formats`` (later Kafka formats, and the ``crc32c`` package under it),
and ``pyarrow.compute`` (a write's null topics).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.spark

_SCRIPT = """
import sys
from pyspark.sql.types import BinaryType, StructField, StructType
from kafka_pyspark._spark.source import Kafka07DataSource

brokers = sys.argv[1]
read = Kafka07DataSource({"broker.list": brokers, "subscribe": "t"})
read.reader(read.schema())
write = Kafka07DataSource({"broker.list": brokers, "topic": "t"})
writer = write.writer(StructType([StructField("value", BinaryType())]), False)
writer.commit([])
print(" ".join(m for m in sys.modules if m.startswith(("kafka_pyspark", "pyarrow.compute",
                                                        "crc32c"))))
"""

NOT_IN_PLANNERS = ("kafka_pyspark._formats", "crc32c", "pyarrow.compute")


@pytest.mark.zk
def test_planners_import_neither_segment_formats_nor_the_write_engine(
    broker: EmbeddedBroker,
) -> None:
    brokers = f"{broker.broker_id}:{broker.host}:{broker.port}"
    out = subprocess.run([sys.executable, "-c", _SCRIPT, brokers], capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(out.stdout.split())
    assert "kafka_pyspark._spark.write.driver" in loaded  # the script did get that far
    assert sorted(m for m in loaded if m.startswith(NOT_IN_PLANNERS)) == []

