"""``python -m kafka_pyspark.demo`` (``make demo``): a local 0.7 cluster, written and read by Spark.

Starts a ZooKeeper (Debian's package) and two embedded 0.7 brokers in a temporary directory
(:class:`kafka_pyspark.testing.cluster.LocalKafka`, as ``kafka07 local-cluster`` does),
writes keyed rows with ``df.write.format("kafka07")`` (uncompressed, gzip and snappy), reads
them back with ``spark.read.format("kafka07")``, prints the counts per broker-partition and a
few rows, and shuts everything down. Needs Java 17 and the ``zookeeper`` package (``make
setup`` checks both).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOPIC = "demo-events"
CODECS = ("none", "gzip", "snappy")

__all__ = ["main"]


def _spark_env() -> None:
    repo = Path(__file__).resolve().parent.parent
    conf = repo / "spark-conf"
    if conf.is_dir():
        os.environ.setdefault("SPARK_CONF_DIR", str(conf))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def write_with_spark(spark: SparkSession, zk_connect: str, n: int) -> int:
    """Write ``n`` keyed rows per codec with ``df.write.format("kafka07")``; returns the total.

    The topic is new at the first write, so (as 0.7 producers do) that write goes to partition 0
    of every live broker; the brokers then register all their partitions and the later writes
    spread over them by the key's Java ``String.hashCode``.
    """
    for codec in CODECS:
        rows = spark.range(n).selectExpr(
            "CAST(id % 10 AS STRING) AS key",
            f"CONCAT('{codec} event ', CAST(id AS STRING)) AS value",
        )
        (
            rows.write.format("kafka07")
            .option("zk.connect", zk_connect)
            .option("topic", TOPIC)
            .option("compression.codec", codec)
            .mode("append")
            .save()
        )
    return n * len(CODECS)


def read_with_spark(spark: SparkSession, zk_connect: str, written: int) -> bool:
    """Read the topic back with ``spark.read.format("kafka07")``, print the counts per
    broker-partition and codec and a few rows; whether all ``written`` rows came back."""
    df = spark.read.format("kafka07").option("zk.connect", zk_connect).option(
        "subscribe", TOPIC).load()
    counts = (
        df.groupBy("broker", "partition", "compression").count()
        .orderBy("broker", "partition", "compression")
    )
    print("messages per broker-partition and codec (the first write found the topic "
          "new and used partition 0 of each broker, as 0.7 producers do):")
    counts.show(truncate=False)
    print("the first two messages of each codec on broker 0, partition 0 (inside a "
          "compressed wrapper, offset is the wrapper's and next_offset the one after "
          "it):")
    first = df.where("broker = 0 AND partition = 0").selectExpr(
        "topic", "broker", "partition", "offset", "next_offset", "inner_index",
        "compression", "CAST(value AS STRING) AS value",
    )
    sample = None
    for codec in CODECS:
        two = first.where(f"compression = '{codec}'").orderBy("offset", "inner_index").limit(2)
        sample = two if sample is None else sample.unionAll(two)
    assert sample is not None
    sample.orderBy("offset", "inner_index").show(truncate=False)
    read = df.count()
    print(f"read {read} of {written} messages: {'all there' if read == written else 'MISMATCH'}")
    return bool(read == written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="rows written per codec")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # the embedded brokers report their ZooKeeper session ending at shutdown: expected here
    logging.getLogger("kafka_pyspark.testing").setLevel(logging.ERROR)
    _spark_env()

    from kafka_pyspark.testing.cluster import LocalKafka

    t0 = time.monotonic()
    with LocalKafka(brokers=2, partitions=(2, 3)) as cluster:
        zk, tmp = cluster.zk_connect, cluster.tmp
        assert tmp is not None  # started
        print(f"work directory: {tmp}")
        print(f"ZooKeeper and brokers {cluster.broker_list} at zk.connect={zk} "
              f"({time.monotonic() - t0:.1f} s; `kafka07 local-cluster` starts the same)")
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.appName("kafka07-demo")
                 .config("spark.sql.warehouse.dir", str(tmp / "spark-warehouse"))
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        try:
            from kafka_pyspark import register

            register(spark)
            written = write_with_spark(spark, zk, args.messages)
            print(f"wrote {written} rows to topic {TOPIC!r} with df.write.format('kafka07') "
                  f"({args.messages} each as {', '.join(CODECS)}; key = id % 10)")
            ok = read_with_spark(spark, zk, written)
        finally:
            spark.stop()
    print("stopped ZooKeeper and brokers")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
