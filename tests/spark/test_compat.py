"""Spark versions: what the installed pyspark offers decides what the connector uses, and the
stream reader of Spark 4.0/4.1 (no admission control) keeps the micro-batch's start itself.

The legacy reader is plain Python: its tests run on every pyspark (they call it as Spark 4.0
does, ``latestOffset()`` without arguments); the Spark session tests of this module and the
other Spark-facing files also run on the oldest supported pyspark (``make test-oldest``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from _cluster import send, unanswering_broker, values

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._spark import MIN_PYSPARK, _version_tuple, compat
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.source import Kafka07DataSource
from kafka_pyspark._spark.stream.legacy_reader import Kafka07LegacyStreamReader
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark.errors import DataLossError, OptionError
from kafka_pyspark.testing.broker import EmbeddedBroker

VERSION = _version_tuple(pyspark.__version__)


def legacy(zk: str, **options: str) -> Kafka07LegacyStreamReader:
    return Kafka07LegacyStreamReader({"zk.connect": zk, **options}, READ_SCHEMA)


def read_all(reader: Kafka07StreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    batches = [b for part in reader.partitions(start, end) for b in reader.read(part)]
    return sorted(pa.Table.from_batches(batches).column("value").to_pylist()) if batches else []


@pytest.fixture
def topic() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


def test_features_follow_the_installed_pyspark() -> None:
    assert VERSION >= MIN_PYSPARK
    found = (compat.FILTER_PUSHDOWN, compat.STREAM_ARROW_WRITER, compat.ADMISSION_CONTROL)
    assert found == (VERSION >= (4, 1), VERSION >= (4, 1), VERSION >= (4, 2))


def test_stream_reader_class_follows_admission_control() -> None:
    source = Kafka07DataSource({"broker.list": "0:127.0.0.1:9", "subscribe": "t"})
    reader = source.streamReader(READ_SCHEMA)
    assert isinstance(reader, Kafka07LegacyStreamReader) != compat.ADMISSION_CONTROL
    reader.stop()


def test_max_bytes_per_trigger_refused_without_admission_control() -> None:
    with pytest.raises(OptionError, match=r"maxBytesPerTrigger.*Spark 4\.2 or later"):
        Kafka07LegacyStreamReader(
            {"broker.list": "0:127.0.0.1:9", "subscribe": "t", "maxBytesPerTrigger": "1000"},
            READ_SCHEMA,
        )


@pytest.mark.zk
def test_legacy_reader_keeps_the_start_itself(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    r = legacy(zk_connect, subscribe=topic, startingOffsets="earliest")
    start = r.initialOffset()
    end = r.latestOffset()  # as Spark 4.0 calls it
    assert end == {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0}}
    assert read_all(r, start, end) == values("a", 10)
    assert r.latestOffset() == end  # nothing new: no micro-batch
    send(broker, topic, 1, encode_message_set(values("b", 4), compression="gzip"))
    end2 = r.latestOffset()
    assert end2 == {topic: {"0-0": end[topic]["0-0"], "0-1": broker.log_end(topic, 1)}}
    assert read_all(r, end, end2) == values("b", 4)
    r.stop()


@pytest.mark.zk
def test_legacy_reader_restarted_reads_from_the_checkpoint(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    checkpoint = {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0}}
    send(broker, topic, 0, encode_message_set(values("c", 3)))
    r = legacy(zk_connect, subscribe=topic)  # restarted: no initialOffset call
    end = r.latestOffset()
    assert end == {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0}}
    assert read_all(r, checkpoint, end) == values("c", 3)
    r.stop()


@pytest.mark.zk
def test_legacy_restart_keeps_the_offsets_of_a_broker_that_does_not_answer(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    """Restarted while broker 1 is registered but does not answer: the first micro-batch ends
    at the log ends of the brokers that answered, and broker 1's partition keeps its
    checkpointed offset in the next one (it is not read again from its earliest later)."""
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    checkpoint = {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0, "1-0": 120}}
    send(broker, topic, 0, encode_message_set(values("c", 3)))
    log_end = broker.log_end(topic, 0)
    with unanswering_broker(zk_connect, 1, topic):
        r = legacy(zk_connect, subscribe=topic, **{"socket.timeout.ms": "300"})
        end = r.latestOffset()
        assert end == {topic: {"0-0": log_end, "0-1": 0}}
        assert read_all(r, checkpoint, end) == values("c", 3)
        after = r.latestOffset()
        assert after == {topic: {"0-0": log_end, "0-1": 0, "1-0": 120}}
        assert r.partitions(end, after) == []
        r.stop()


@pytest.mark.zk
def test_legacy_restart_past_the_log_end_is_data_loss(
    broker: EmbeddedBroker, zk_connect: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    send(broker, topic, 0, encode_message_set(values("a", 2)))
    log_end = broker.log_end(topic, 0)
    assert log_end is not None
    past = {topic: {"0-0": log_end + 1000, "0-1": 0}}
    r = legacy(zk_connect, subscribe=topic)
    end = r.latestOffset()
    with pytest.raises(DataLossError, match=r"past the log end"):
        r.partitions(past, end)
    r.stop()
    lenient = legacy(zk_connect, subscribe=topic, failOnDataLoss="false")
    end = lenient.latestOffset()
    assert lenient.partitions(past, end) == []
    assert "continuing from the log end" in caplog.text
    lenient.stop()


@pytest.mark.spark
def test_max_bytes_per_trigger_fails_the_query_on_spark_without_it(spark: Any) -> None:
    if compat.ADMISSION_CONTROL:
        pytest.skip(f"pyspark {pyspark.__version__} has admission control")
    df = (spark.readStream.format("kafka07").option("broker.list", "0:127.0.0.1:9")
          .option("subscribe", "t").option("maxBytesPerTrigger", "1000").load())
    query = df.writeStream.format("noop").start()
    with pytest.raises(Exception, match=r"maxBytesPerTrigger.*Spark 4\.2 or later"):
        query.awaitTermination(120)
    query.stop()
