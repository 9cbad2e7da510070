"""Run by tests/test_spark_connect.py in its own process (Spark Connect and the test session's
classic Spark cannot share a process): ``python tests/connect_smoke.py ZK_CONNECT CHECKPOINT``.

Through ``SparkSession.builder.remote("local[2]")``: a write, a batch read and a short
``availableNow`` stream, and a named stream into the kafka07 sink; prints one JSON document with
what came back.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def named_copy(spark: Any, zk: str, checkpoint: str) -> list[str]:
    """A named stream from topic c into the kafka07 sink (topic c2), read back: Spark Connect
    hands the sink queryName and checkpointLocation too."""
    q = (spark.readStream.format("kafka07").option("zk.connect", zk)
         .option("subscribe", "c").option("startingOffsets", "earliest").load()
         .selectExpr("value")
         .writeStream.format("kafka07").queryName("connect_copy")
         .option("zk.connect", zk).option("topic", "c2")
         .option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    df = spark.read.format("kafka07").option("zk.connect", zk).option("subscribe", "c2").load()
    return sorted(r.v for r in df.selectExpr("CAST(value AS STRING) AS v").collect())


def main(zk: str, checkpoint: str) -> dict[str, object]:
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    try:
        register(spark)  # through the Connect client: the class goes to the server
        rows = spark.range(100).selectExpr(
            "CAST(id % 5 AS STRING) AS key", "CONCAT('m', CAST(id AS STRING)) AS value"
        )
        (rows.write.format("kafka07").option("zk.connect", zk).option("topic", "c")
         .option("compression.codec", "gzip").mode("append").save())
        df = (spark.read.format("kafka07").option("zk.connect", zk)
              .option("subscribe", "c").load())
        values = sorted(r.v for r in df.selectExpr("CAST(value AS STRING) AS v").collect())
        q = (spark.readStream.format("kafka07").option("zk.connect", zk)
             .option("subscribe", "c").option("startingOffsets", "earliest")
             .load()
             .writeStream.format("memory").queryName("connect_stream")
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        streamed = spark.sql("SELECT COUNT(*) AS n FROM connect_stream").first()
        return {
            "connect": type(spark).__module__,
            "values": values,
            "streamed": None if streamed is None else streamed.n,
            "copied": named_copy(spark, zk, checkpoint),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
