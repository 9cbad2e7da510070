"""``spark.read.format("kafka07").option("path", ...)`` end to end through local Spark: the
embedded broker's own segment files read back exactly as the live reader reads them; a log
directory of every format narrowed by subscribe and filters; corruption errors."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


COMMON = ("topic", "broker", "partition", "offset", "next_offset", "inner_index",
          "compression", "value")

pytestmark = pytest.mark.spark


def load(spark: SparkSession, **options: str) -> Any:
    reader = spark.read.format("kafka07")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def tuples(df: Any, columns: tuple[str, ...] = COMMON) -> list[tuple[Any, ...]]:
    return sorted(tuple(bytes(r[c]) if isinstance(r[c], bytearray) else r[c] for c in columns)
                  for r in df.collect())


@pytest.mark.zk
def test_broker_segment_files_read_back_like_the_live_reader(
    spark: SparkSession, zk_connect: str, tmp_path: Path
) -> None:
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark._options import parse_read_options
    from kafka_pyspark._spark.read.batch import plan_batch
    from kafka_pyspark._spark.read.executor import read_partition
    from kafka_pyspark.client import Producer
    from kafka_pyspark.testing.broker import EmbeddedBroker

    rng = random.Random(11)
    sent = 0
    with EmbeddedBroker(broker_id=3, log_dir=tmp_path / "logs", zk_connect=zk_connect,
                        num_partitions=2, log_file_size=10_000) as b:
        with Producer({3: (b.host, b.port)}) as producer:
            for i in range(30):
                values = [rng.randbytes(rng.randrange(0, 700)) for _ in range(rng.randrange(1, 9))]
                codec = ("none", "gzip", "snappy")[i % 3]
                producer.send(3, "archived", i % 2,
                              encode_message_set(values, compression=codec, magic=i % 4 and 1))
                sent += len(values)
            producer.flush()
        b.wait_for_topic("archived")
        # the live reader's rows, in process (its Spark path is tested in test_spark_read)
        live = sorted(
            tuple(bytes(v) if isinstance(v, bytes | bytearray) else v for v in row)
            for p in plan_batch(parse_read_options({"zk.connect": zk_connect,
                                                    "subscribe": "archived"}))
            for batch in read_partition(p)
            for row in zip(*batch.to_pydict().values(), strict=True)
        )
        files = sorted((tmp_path / "logs" / "archived-0").glob("*.kafka"))
        assert len(files) >= 2  # several segments
        got = tuples(load(spark, path=str(tmp_path / "logs"), broker="3"),
                     (*COMMON, "key", "timestamp", "timestamp_type", "headers"))
        assert [r[:8] for r in got] == live and len(live) == sent
        assert {r[8:] for r in got} == {(None, None, -1, None)}


def test_log_directory_subscribe_and_filters(
    spark: SparkSession, logdir: Path
) -> None:
    everything = load(spark, path=str(logdir))
    assert everything.count() == 47
    events0 = load(spark, path=f"file://{logdir}", subscribe="events").where(
        "partition = 0 and offset >= 25")
    assert tuples(events0, ("partition", "offset", "value", "key", "compression")) == [
        (0, i, f"v{i}".encode(), f"k{i}".encode(), "lz4") for i in range(25, 30)]
    pattern = load(spark, path=str(logdir), subscribePattern="old|mix.*", broker="2")
    assert tuples(pattern, ("topic", "broker", "offset", "timestamp_type")) == [
        ("mixed", 2, 0, -1), ("mixed", 2, 1, 1 - 1), ("mixed", 2, 2, 0), ("mixed", 2, 3, 0),
        ("old", 2, 0, -1), ("old", 2, 11, -1), ("old", 2, 23, -1)]
    one = load(spark, path=str(logdir / "mixed-0")).where("offset = 2").collect()[0]
    assert one["timestamp"].astimezone(dt.timezone.utc) == dt.datetime(
        1970, 1, 1, 0, 0, 0, 6000, dt.timezone.utc)
    assert one["value"] == b"m2" and one["compression"] == "lz4" and one["headers"] is None


def test_headers_and_null_values_through_spark(spark: SparkSession, tmp_path: Path) -> None:
    from segment_builder import ZSTD, batch, record

    d = tmp_path / "h-0"
    d.mkdir()
    (d / f"{0:020d}.log").write_bytes(batch(0, [
        record(0, None, key=b"k", headers=[("a", b"1"), ("b", None)]),
        record(1, b"v", key=None)], codec=ZSTD))
    rows = load(spark, path=str(d)).orderBy("offset").collect()
    assert [(r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in rows] == [(b"k", None, [("a", b"1"), ("b", None)]), (None, b"v", [])]


def test_corrupt_file_fails_naming_file_and_byte(spark: SparkSession, tmp_path: Path) -> None:
    from segment_builder import batch, record

    d = tmp_path / "c-0"
    d.mkdir()
    first = batch(0, [record(0, b"a")])
    data = bytearray(first + batch(1, [record(0, b"b")]))
    data[len(first) + 30] ^= 0x01
    (d / f"{0:020d}.log").write_bytes(bytes(data))
    with pytest.raises(Exception, match=rf"segment file \S*c-0/0+\.log, byte {len(first)}: "
                                        r"record batch CRC-32C mismatch"):
        load(spark, path=str(d)).collect()
    lenient = load(spark, path=str(d), failOnDataLoss="false")
    assert tuples(lenient, ("offset", "value")) == [(0, b"a")]


def test_path_with_zk_connect_or_stream_is_an_error(
    spark: SparkSession, logdir: Path
) -> None:
    with pytest.raises(Exception, match=r"option 'path': conflicts with zk\.connect"):
        load(spark, path=str(logdir), **{"zk.connect": "127.0.0.1:1"})
    from kafka_pyspark._spark.schema import SEGMENT_READ_SCHEMA
    from kafka_pyspark._spark.source import Kafka07DataSource
    from kafka_pyspark.errors import OptionError

    source = Kafka07DataSource({"path": str(logdir)})
    assert source.schema() == SEGMENT_READ_SCHEMA
    with pytest.raises(OptionError, match="read in batch"):
        source.streamReader(SEGMENT_READ_SCHEMA)
