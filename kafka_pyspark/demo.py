"""``python -m kafka_pyspark.demo`` (``make demo``): a local 0.7 cluster, written and read by Spark.

Starts a ZooKeeper (Debian's package) and two embedded 0.7 brokers in a temporary directory,
writes messages with the low-level client (uncompressed, gzip and snappy message sets), reads
them back with ``spark.read.format("kafka07")``, prints the counts per broker-partition and a
few rows, and shuts everything down. Needs Java 17 and the ``zookeeper`` package (``make
setup`` checks both).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

TOPIC = "demo-events"
CODECS = ("none", "gzip", "snappy")


def _spark_env() -> None:
    repo = Path(__file__).resolve().parent.parent
    conf = repo / "spark-conf"
    if conf.is_dir():
        os.environ.setdefault("SPARK_CONF_DIR", str(conf))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def produce(brokers: dict[int, tuple[str, int]], partitions: dict[int, int], n: int) -> int:
    """Write ``n`` messages per broker-partition, in message sets of each codec in turn."""
    from kafka_pyspark.client import Producer
    from kafka_pyspark.messages import encode_message_set

    total = 0
    with Producer(brokers) as producer:
        for broker, count in sorted(partitions.items()):
            for partition in range(count):
                for first in range(0, n, 100):
                    values = [
                        f"broker {broker} partition {partition} message {i}".encode()
                        for i in range(first, min(first + 100, n))
                    ]
                    codec = CODECS[(first // 100) % len(CODECS)]
                    producer.send(
                        broker, TOPIC, partition, encode_message_set(values, compression=codec)
                    )
                    total += len(values)
        producer.flush()
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="per broker-partition")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # the embedded brokers report their ZooKeeper session ending at shutdown: expected here
    logging.getLogger("kafka_pyspark.testing").setLevel(logging.ERROR)
    _spark_env()

    from kafka_pyspark.testing.broker import EmbeddedBroker
    from kafka_pyspark.testing.zookeeper import ZooKeeperServer

    with tempfile.TemporaryDirectory(prefix="kafka07-demo-") as tmp:
        print(f"work directory: {tmp}")
        t0 = time.monotonic()
        with ZooKeeperServer(data_dir=Path(tmp) / "zookeeper") as zk, EmbeddedBroker(
            0, log_dir=Path(tmp) / "broker-0", zk_connect=zk.connect_string, num_partitions=2
        ) as b0, EmbeddedBroker(
            1, log_dir=Path(tmp) / "broker-1", zk_connect=zk.connect_string, num_partitions=3
        ) as b1:
            print(f"ZooKeeper at {zk.connect_string}; brokers 0 at {b0.host}:{b0.port}, "
                  f"1 at {b1.host}:{b1.port} ({time.monotonic() - t0:.1f} s)")
            brokers = {0: (b0.host, b0.port), 1: (b1.host, b1.port)}
            written = produce(brokers, {0: 2, 1: 3}, args.messages)
            for b in (b0, b1):
                b.wait_for_topic(TOPIC)
            print(f"wrote {written} messages to topic {TOPIC!r} "
                  f"(message sets alternating {', '.join(CODECS)})")

            from pyspark.sql import SparkSession

            spark = SparkSession.builder.appName("kafka07-demo").getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            try:
                from kafka_pyspark import register

                register(spark)
                df = (
                    spark.read.format("kafka07")
                    .option("zk.connect", zk.connect_string)
                    .option("subscribe", TOPIC)
                    .load()
                )
                counts = (
                    df.groupBy("broker", "partition", "compression").count()
                    .orderBy("broker", "partition", "compression")
                )
                print("messages per broker-partition and codec:")
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
                    two = first.where(f"compression = '{codec}'").orderBy(
                        "offset", "inner_index").limit(2)
                    sample = two if sample is None else sample.unionAll(two)
                assert sample is not None
                sample.orderBy("offset", "inner_index").show(truncate=False)
                read = df.count()
                print(f"read {read} of {written} messages: "
                      f"{'all there' if read == written else 'MISMATCH'}")
                ok = read == written
            finally:
                spark.stop()
    print("stopped ZooKeeper and brokers")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
