"""``df.write.format("kafka07")`` end to end: a local Spark, real ZooKeeper, embedded brokers.

Every write is read back with the low-level client (``kafka_pyspark.client.iter_range``) and
compared as a multiset. Key routing is checked against Java ``String.hashCode`` values computed
here by an independent reference loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest
from _cluster import java_hash, java_index
from _spark_write import read_topic, values_of, writer

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from pyspark.sql import SparkSession

    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = [pytest.mark.spark, pytest.mark.zk]


def create_topic(
    spark: SparkSession, zk: str, brokers: Sequence[EmbeddedBroker], topic: str
) -> None:
    """Write one message to partition 0 of every broker; wait until they registered the topic."""
    rows = [(b.broker_id, 0, "x") for b in brokers]
    df = spark.createDataFrame(rows, "broker int, partition int, value string")
    writer(df, zk, topic=topic).save()
    for b in brokers:
        b.wait_for_topic(topic)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_write_each_codec_round_trip(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str, codec: str
) -> None:
    rows = [(f"k{i % 37}", f"value-{i}-" + "x" * (i % 50)) for i in range(2000)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(3)
    writer(df, zk_connect, topic=f"codec-{codec}", compression_codec=codec,
           batch_size="50").save()
    found = read_topic(brokers, f"codec-{codec}")
    assert values_of(found) == Counter(v.encode() for _, v in rows)
    assert {c for vals in found.values() for _, c in vals} == {codec}
    # a new topic: partition 0 of every live broker (PROTOCOL.md "New topics")
    assert set(found) <= {(0, 0), (1, 0)}
    # the same key always lands on the same broker-partition
    where: dict[str, set[tuple[int, int]]] = {}
    for bp, vals in found.items():
        for v, _ in vals:
            i = int(v.decode().split("-")[1])
            where.setdefault(rows[i][0], set()).add(bp)
    assert all(len(s) == 1 for s in where.values())


def test_key_routing_matches_java_hashcode(spark: SparkSession, brokers: list[EmbeddedBroker],
                                           zk_connect: str) -> None:
    topic = "routed"
    create_topic(spark, zk_connect, brokers, topic)
    # registered now: broker 0 has 2 partitions, broker 1 has 3 -> sorted list of 5
    bps = [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    keys = ["hello", "", "Aa", "BB", "key-1", "key-2", "héllo", "日本", "😀", "kafka", "spark",
            "zookeeper", "broker", "partition"] + [f"user{i}" for i in range(40)]
    assert java_hash("hello") == 99162322 and java_hash("") == 0
    assert java_hash("polygenelubricants") == -(2**31)
    rows = [(k, f"{k}|{i}") for i in range(6) for k in keys]
    df = spark.createDataFrame(rows, "key string, value string").repartition(4)
    writer(df, zk_connect, topic=topic).save()
    found = read_topic(brokers, topic)
    seen: Counter[str] = Counter()
    for bp, vals in found.items():
        for v, _ in vals:
            text = v.decode()
            if text == "x":
                continue
            key = text.rsplit("|", 1)[0]
            assert bp == bps[java_index(key, 5)], (key, bp)
            seen[key] += 1
    assert seen == Counter({k: 6 for k in keys})
    assert len({bps[java_index(k, 5)] for k in keys}) == 5  # the test covers every partition


def test_binary_keys_and_min_value_corner(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str
) -> None:
    from kafka_pyspark._partitioner import java_bytes_hashcode

    topic = "corner"
    create_topic(spark, zk_connect, [broker], topic)
    # 2 partitions on one broker: Math.abs(MIN_VALUE) % 2 == 0, so the corner key is valid
    rows = [("polygenelubricants", b"corner"), ("hello", b"hello")]
    df = spark.createDataFrame(rows, "key string, value binary")
    writer(df, zk_connect, topic=topic).save()
    brows = [(bytes([i, 255 - i]), f"b{i}".encode()) for i in range(20)]
    writer(spark.createDataFrame(brows, "key binary, value binary"), zk_connect,
           topic=topic).save()
    found = read_topic([broker], topic)
    place = {v: bp for bp, vals in found.items() for v, _ in vals}
    assert place[b"corner"] == (0, 0)
    assert place[b"hello"] == (0, java_index("hello", 2))
    for k, v in brows:
        h = java_bytes_hashcode(k)
        assert place[v] == (0, abs(h) % 2)


def test_min_value_key_without_partition_is_an_error(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    topic = "corner3"
    create_topic(spark, zk_connect, brokers, topic)
    df = spark.createDataFrame([("polygenelubricants", "v")], "key string, value string")
    with pytest.raises(Exception, match="InvalidPartitionError") as e:
        writer(df.coalesce(1), zk_connect, topic=topic).save()
    assert "-2147483648" in str(e.value)
    assert "polygenelubricants" in str(e.value)


def test_new_topic_then_registered_partitions(spark: SparkSession, brokers: list[EmbeddedBroker],
                                              zk_connect: str) -> None:
    topic = "fresh"
    df = spark.range(3000).selectExpr("CAST(id AS STRING) AS value",
                                      "CAST(id AS STRING) AS key").repartition(2)
    writer(df, zk_connect, topic=topic).save()
    found = read_topic(brokers, topic)
    assert set(found) == {(0, 0), (1, 0)}
    assert sum(len(v) for v in found.values()) == 3000
    for b in brokers:
        b.wait_for_topic(topic)
    keys = [f"k{i}" for i in range(100)]
    df2 = spark.createDataFrame([(k, "second") for k in keys], "key string, value string")
    writer(df2, zk_connect, topic=topic).save()
    found2 = read_topic(brokers, topic)
    second = {bp for bp, vals in found2.items() for v, _ in vals if v == b"second"}
    assert second == {(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)}


def test_explicit_targets_and_topic_column(spark: SparkSession, brokers: list[EmbeddedBroker],
                                           zk_connect: str) -> None:
    rows = [(f"t{i % 3}" if i % 4 else None, i % 2, 0, f"r{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "topic string, broker int, partition int, value string")
    writer(df, zk_connect, topic="fallback").save()
    for t in ("t0", "t1", "t2", "fallback"):
        found = read_topic(brokers, t)
        expected = Counter(
            f"r{i}".encode() for i, r in enumerate(rows) if (r[0] or "fallback") == t
        )
        assert values_of(found) == expected
        for (b, p), vals in found.items():
            for v, _ in vals:
                assert (b, p) == (int(v[1:]) % 2, 0)


def test_explicit_target_errors(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str
) -> None:
    df = spark.createDataFrame([(7, 0, "v")], "broker int, partition int, value string")
    with pytest.raises(Exception, match="broker 7 is not a live broker"):
        writer(df, zk_connect, topic="bad-target").save()
    df = spark.createDataFrame([(0, None, "v")], "broker int, partition int, value string")
    with pytest.raises(Exception, match="give both or neither"):
        writer(df, zk_connect, topic="bad-target").save()


def test_driver_side_errors_before_any_byte(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str
) -> None:
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    cases = [
        ({"topic": "t", "compression.codec": "lz4"}, "compression.codec"),
        ({"topic": "t", "bogus.option": "1"}, "bogus.option"),
        ({"topic": "bad/name"}, "not allowed in a directory name"),
        ({}, "no target topic"),
        ({"topic": "t", "batch.size": "0"}, "batch.size"),
    ]
    for opts, message in cases:
        w = df.write.format("kafka07").mode("append").option("zk.connect", zk_connect)
        for k, v in opts.items():
            w = w.option(k, v)
        with pytest.raises(Exception, match=message.replace(".", r"\.")):
            w.save()
    bad = spark.createDataFrame([(1, 2)], "value int, key int")
    with pytest.raises(Exception, match="'value' must be binary or string"):
        writer(bad, zk_connect, topic="t").save()
    with pytest.raises(Exception, match="needs a 'value' column"):
        writer(spark.createDataFrame([("k",)], "key string"), zk_connect, topic="t").save()
    with pytest.raises(Exception, match="append-only"):
        df.write.format("kafka07").mode("overwrite").option("zk.connect", zk_connect).option(
            "topic", "t").save()
    assert broker.topics() == []  # nothing was written anywhere


def test_oversize_message_is_reported(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str
) -> None:
    rows = [("k1", "a" * 10), ("big-key", "b" * 5000), ("k3", "c" * 10)]
    df = spark.createDataFrame(rows, "key string, value string").coalesce(1)
    with pytest.raises(Exception, match="MessageTooLargeError") as e:
        writer(df, zk_connect, topic="oversize", max_message_size="1000").save()
    text = str(e.value)
    assert "row 1 " in text and "big-key" in text and "5000 bytes" in text
    assert "max.message.size (1000)" in text


def test_broker_list_mode(spark: SparkSession, broker: EmbeddedBroker) -> None:
    topic = "static"
    df = spark.range(500).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
    (df.write.format("kafka07").mode("append").option("broker.list", broker.broker_list_entry)
     .option("topic", topic).option("compression.codec", "1").save())
    found = read_topic([broker], topic)
    assert values_of(found) == Counter(str(i).encode() for i in range(500))
    # probing: both of the broker's 2 partitions are used, by key
    for (_, p), vals in found.items():
        for v, _ in vals:
            assert p == java_index(v.decode(), 2)


def test_a_batch_write_leaves_no_records(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str, kz: KazooClient
) -> None:
    """exactly-once (the default with zk.connect): the job's records go with its commit."""
    rows = [(f"value-{i}",) for i in range(500)]
    df = spark.createDataFrame(rows, "value string").repartition(3)
    writer(df, zk_connect, topic="no-records", batch_size="20").save()
    assert values_of(read_topic(brokers, "no-records")) == Counter(v.encode() for v, in rows)
    assert kz.get_children("/kafka_pyspark/sinks") == []


def test_a_batch_job_node_is_made_ahead_and_goes_with_the_commit(
    brokers: list[EmbeddedBroker], zk_connect: str, kz: KazooClient
) -> None:
    """The driver makes an exactly-once job's node before its tasks run (each then claims in
    one request); its commit deletes it also when no task wrote (none names it)."""
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_pyspark._spark.write.faces import Kafka07BatchWriter

    schema = StructType([StructField("value", BinaryType(), True)])
    for end in ("commit", "abort"):
        job = Kafka07BatchWriter({"zk.connect": zk_connect, "topic": "ahead"}, schema, False)
        assert kz.get_children(f"/kafka_pyspark/sinks/{job.job}") == ["0"]
        getattr(job, end)([])
        assert kz.exists(f"/kafka_pyspark/sinks/{job.job}") is None


def test_an_empty_batch_write_leaves_no_records(
    spark: SparkSession, brokers: list[EmbeddedBroker], zk_connect: str, kz: KazooClient
) -> None:
    df = spark.range(0, numPartitions=2).selectExpr("CAST(id AS STRING) AS value")
    writer(df, zk_connect, topic="empty-job").save()
    assert kz.get_children("/kafka_pyspark/sinks") == []
