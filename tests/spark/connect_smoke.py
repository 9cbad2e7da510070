"""Run by tests/spark/test_spark_connect.py in its own process (Spark Connect and the test session's
classic Spark cannot share a process, and one Connect server is started once):
``python tests/spark/connect_smoke.py ZK_CONNECT CHECKPOINT EVENT_LOG_DIR PASSWORD``.

Through ``SparkSession.builder.remote("local[2]")`` with the event log on: a write, a batch read
and a short ``availableNow`` stream, a named stream into the kafka07 sink, then a write, a read
and ``CREATE TEMP VIEW ... USING kafka07 OPTIONS (...)`` (single and double quotes) with
``zk.auth.user`` + ``zk.auth.password`` (ZooKeeper without ACLs takes any credentials): Spark
Connect puts every plan, as text, in the event log. Prints one JSON document with what came
back.
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


def with_credentials(spark: Any, zk: str, password: str) -> dict[str, int]:
    """A write, a read and two SQL views with ZooKeeper credentials: how many rows each saw."""
    creds = {"zk.connect": zk, "zk.auth.user": "connectuser", "zk.auth.password": password}
    rows = spark.range(5).selectExpr("CONCAT('s', CAST(id AS STRING)) AS value")
    rows.write.format("kafka07").options(**creds, topic="s").mode("append").save()
    read = spark.read.format("kafka07").options(**creds, subscribe="s").load().count()
    spark.sql(f"CREATE TEMP VIEW v USING kafka07 OPTIONS (zk.connect '{zk}', "
              f"'zk.auth.user' 'connectuser', zk.auth.password '{password}', 'subscribe' 's')")
    spark.sql(f'CREATE TEMP VIEW w USING kafka07 OPTIONS (zk.connect "{zk}",\n'
              f'  zk.auth.user "connectuser",\n  zk.auth.password "{password}",\n'
              '  subscribe "s")')
    viewed = spark.sql("SELECT * FROM v UNION ALL SELECT * FROM w").count()
    return {"read": read, "viewed": viewed}


def main(zk: str, checkpoint: str, events: str, password: str) -> dict[str, object]:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    spark = (SparkSession.builder.remote("local[2]")
             .config("spark.eventLog.enabled", "true")
             .config("spark.eventLog.dir", Path(events).as_uri())
             .config("spark.eventLog.compress", "false")
             .getOrCreate())
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
            "credentials": with_credentials(spark, zk, password),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
