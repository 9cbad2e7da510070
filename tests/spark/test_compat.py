"""Spark versions: what the installed pyspark offers decides what the connector uses, and the
stream reader of Spark 4.0/4.1 (no admission control) keeps the micro-batch's start itself.

The legacy reader is plain Python: its tests run on every pyspark and call it in the order
Spark 4.0.0 and 4.1 were seen to (``legacy_reader``'s docstring: ``latestOffset()`` without
arguments, a restart announced by ``partitions(X, X)``); the Spark-facing files run it under a
real Spark 4.0 with ``make test-oldest``."""

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
from kafka_pyspark.errors import DataLossError, KafkaError
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


@pytest.mark.zk
def test_legacy_reader_fresh_query_as_spark_4_0_calls_it(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    """A fresh query: Spark 4.0 asks latestOffset() before initialOffset(); the reader resolves
    the start itself and initialOffset() gives the same one. Then the loop: latestOffset(),
    commit(previous end), partitions(previous end, end)."""
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    r = legacy(zk_connect, subscribe=topic, startingOffsets="earliest")
    end = r.latestOffset()
    start = r.initialOffset()
    assert start == {topic: {"0-0": 0, "0-1": 0}}
    assert end == {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0}}
    assert read_all(r, start, end) == values("a", 10)
    assert r.latestOffset() == end  # nothing new: no micro-batch
    send(broker, topic, 1, encode_message_set(values("b", 4), compression="gzip"))
    end2 = r.latestOffset()
    assert end2 == {topic: {"0-0": end[topic]["0-0"], "0-1": broker.log_end(topic, 1)}}
    r.commit(end)
    assert read_all(r, end, end2) == values("b", 4)
    r.stop()


@pytest.mark.zk
def test_legacy_reader_bounds_micro_batches_by_max_bytes(
    broker: EmbeddedBroker, zk_connect: str, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """maxBytesPerTrigger on Spark 4.0/4.1: every micro-batch at most the limit, cut at message
    boundaries, all data exactly once; an end Spark asks for again before planning it is
    answered again as it was; what it does is logged once."""
    send(broker, topic, 0, encode_message_set(values("a", 50)))  # 50 messages of 40 bytes
    send(broker, topic, 1, encode_message_set(values("b", 20), compression="gzip"))
    r = legacy(zk_connect, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="300")
    end = r.latestOffset()
    assert r.latestOffset() == end  # not planned yet: the same answer, nothing recomputed
    start = r.initialOffset()
    seen: list[bytes] = []
    moved = []
    for _ in range(40):
        if end == start:
            break
        e, s = end[topic], start[topic]
        moved.append(sum(e[k] - s[k] for k in e))
        seen += read_all(r, start, end)
        start, end = end, r.latestOffset()
        r.commit(start)
    assert end == start == {topic: {"0-0": broker.log_end(topic, 0),
                                    "0-1": broker.log_end(topic, 1)}}
    assert sorted(seen) == sorted(values("a", 50) + values("b", 20))
    assert len(moved) >= 6 and all(0 < m <= 300 for m in moved)
    notes = [m for m in caplog.messages if "maxBytesPerTrigger=300" in m]
    assert len(notes) == 1 and "Trigger.AvailableNow" in notes[0]
    r.stop()


@pytest.mark.zk
def test_legacy_reader_restarted_starts_where_spark_says(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    """Restarted from a checkpoint: Spark 4.0 first calls partitions(X, X) with the
    checkpoint's last end X, so the first micro-batch is bounded from there too."""
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    first = broker.log_end(topic, 0)
    assert first is not None
    checkpoint = {topic: {"0-0": first, "0-1": 0}}
    send(broker, topic, 0, encode_message_set(values("c", 30)))
    r = legacy(zk_connect, subscribe=topic, maxBytesPerTrigger="400")  # no initialOffset call
    assert r.partitions(checkpoint, checkpoint) == []
    end = r.latestOffset()
    assert end == {topic: {"0-0": first + 400, "0-1": 0}}
    r.commit(checkpoint)
    assert read_all(r, checkpoint, end) == values("c", 10)
    r.stop()


@pytest.mark.zk
def test_legacy_restart_keeps_the_offsets_of_a_broker_that_does_not_answer(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    """Restarted while broker 1 is registered but does not answer: its partition keeps its
    checkpointed offset (it is not read again from its earliest later)."""
    send(broker, topic, 0, encode_message_set(values("a", 10)))
    checkpoint = {topic: {"0-0": broker.log_end(topic, 0), "0-1": 0, "1-0": 120}}
    send(broker, topic, 0, encode_message_set(values("c", 3)))
    log_end = broker.log_end(topic, 0)
    with unanswering_broker(zk_connect, 1, topic):
        r = legacy(zk_connect, subscribe=topic, **{"socket.timeout.ms": "300"})
        r.partitions(checkpoint, checkpoint)
        end = r.latestOffset()
        assert end == {topic: {"0-0": log_end, "0-1": 0, "1-0": 120}}
        assert read_all(r, checkpoint, end) == values("c", 3)
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
    r.partitions(past, past)
    with pytest.raises(DataLossError, match=r"past the log end"):
        r.latestOffset()
    r.stop()
    lenient = legacy(zk_connect, subscribe=topic, failOnDataLoss="false")
    lenient.partitions(past, past)
    end = lenient.latestOffset()
    assert end == {topic: {"0-0": 0, "0-1": 0}}
    assert lenient.partitions(past, end) == []
    assert "continuing from the earliest offset 0" in caplog.text
    lenient.stop()


@pytest.mark.zk
def test_legacy_end_asked_before_a_restart_says_where_it_stands(
    broker: EmbeddedBroker, zk_connect: str, topic: str
) -> None:
    """Spark's availableNow wrapper asks for an end before partitions(X, X): an end at or past
    the checkpoint goes on; one behind it (resolved from startingOffsets and bounded) would
    read data again: the query fails before reading anything."""
    send(broker, topic, 0, encode_message_set(values("a", 20)))
    checkpoint = {topic: {"0-0": 400, "0-1": 0}}
    r = legacy(zk_connect, subscribe=topic, startingOffsets="earliest")
    end = r.latestOffset()  # every log end: at or past the checkpoint
    assert r.partitions(checkpoint, checkpoint) == []
    assert read_all(r, checkpoint, end) == values("a", 20)[10:]
    r.stop()
    bounded = legacy(zk_connect, subscribe=topic, startingOffsets="earliest",
                     maxBytesPerTrigger="200")
    assert bounded.latestOffset() == {topic: {"0-0": 200, "0-1": 0}}
    wrapper = r"triggerAvailableNowWrapper.*partition 0 is at offset 400.*given was 200"
    with pytest.raises(KafkaError, match=wrapper):
        bounded.partitions(checkpoint, checkpoint)
    bounded.stop()
