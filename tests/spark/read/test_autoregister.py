"""``spark.read.format("kafka07")`` with no ``register()`` call, in a fresh Spark (subprocess).

Spark 4 registers ``DefaultSource`` of every importable ``pyspark_*`` module by itself; the
distribution ships ``pyspark_kafka07``. A fresh JVM is needed: the test session's Spark has
``kafka07`` registered explicitly already.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.spark, pytest.mark.own_spark]

SCRIPT = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master("local[1]").appName("autoregister").getOrCreate()
    try:
        df = (spark.read.format("kafka07").option("broker.list", sys.argv[1])
              .option("subscribe", "auto").load())
        rows = sorted(bytes(r.value).decode() for r in df.select("value").collect())
        print("ROWS=" + ",".join(rows))
    finally:
        spark.stop()
    """
)


def test_format_kafka07_without_register(tmp_path: Path) -> None:
    import pyspark_kafka07
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark._spark.source import Kafka07DataSource
    from kafka_pyspark.client import Producer
    from kafka_pyspark.testing.broker import EmbeddedBroker

    assert pyspark_kafka07.DefaultSource is Kafka07DataSource
    assert pyspark_kafka07.DefaultSource.name() == "kafka07"

    with EmbeddedBroker(0, log_dir=tmp_path / "b0") as b:
        with Producer({0: (b.host, b.port)}) as producer:
            producer.send(0, "auto", 0, encode_message_set([b"a", b"b"], compression="gzip"))
            producer.send(0, "auto", 0, encode_message_set([b"c"]))
            producer.flush()
        script = tmp_path / "autoregister.py"
        script.write_text(SCRIPT)
        env: dict[str, Any] = dict(os.environ)
        env.setdefault("SPARK_CONF_DIR", str(REPO / "spark-conf"))
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        proc = subprocess.run(
            [sys.executable, str(script), f"0:{b.host}:{b.port}"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ROWS=a,b,c" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
