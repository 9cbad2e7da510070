"""Run by tests/test_spark_connect.py in its own process: ``python tests/connect_secrets.py
ZK_CONNECT EVENT_LOG_DIR PASSWORD``.

Through ``SparkSession.builder.remote("local[2]")`` with the event log on: ``register(spark)``,
then a write, a batch read and a ``CREATE TEMP VIEW ... USING kafka07 OPTIONS (...)`` with
``zk.auth.user`` + ``zk.auth.password`` (ZooKeeper without ACLs takes any credentials). Spark
Connect puts every plan, as text, in the event log; prints one JSON document with the counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(zk: str, events: str, password: str) -> dict[str, object]:
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    spark = (SparkSession.builder.remote("local[2]")
             .config("spark.eventLog.enabled", "true")
             .config("spark.eventLog.dir", Path(events).as_uri())
             .config("spark.eventLog.compress", "false")
             .getOrCreate())
    try:
        register(spark)
        creds = {"zk.connect": zk, "zk.auth.user": "connectuser", "zk.auth.password": password}
        rows = spark.range(5).selectExpr("CONCAT('s', CAST(id AS STRING)) AS value")
        rows.write.format("kafka07").options(**creds, topic="s").mode("append").save()
        read = spark.read.format("kafka07").options(**creds, subscribe="s").load().count()
        spark.sql(f"CREATE TEMP VIEW v USING kafka07 OPTIONS (zk.connect '{zk}', "
                  f"'zk.auth.user' 'connectuser', zk.auth.password '{password}', "
                  "'subscribe' 's')")
        viewed = spark.sql("SELECT * FROM v").count()
        return {"read": read, "viewed": viewed}
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
