"""A ZooKeeper outage during a stream: the stream goes on, bounded.

ZooKeeper is stopped (JVM terminated), paused (SIGSTOP: connections open, nothing answered)
or restarted while a query runs, for longer than the stream's ZooKeeper session timeout (2 s
here). The stream keeps producing exact rows from the last known brokers and partitions, group
commits wait and catch up when ZooKeeper is back, and an outage longer than
``zk.outage.max.ms`` fails the query with a clear error. When the broker's own session
expires (ZooKeeper up), its partitions leave the registry until it registers again: the
stream keeps their offsets meanwhile and reads the rows sent in between once they are back.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import expire_broker_session
from rel_support import Recorder, drain, new_chroot, produce, read_sink, stream_query, values

from kafka_pyspark._cluster import Registry
from kafka_pyspark._spark.compat import ReadAllAvailable
from kafka_pyspark.errors import RegistryUnavailableError
from kafka_pyspark.testing.broker import EmbeddedBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.zk]

SHORT_ZK = {"zk.sessiontimeout.ms": "2000", "zk.connectiontimeout.ms": "2000"}
OUTAGE_S = 3.0  # longer than the 2 s session timeout


@pytest.fixture
def zk_broker(revive_zookeeper: Any, tmp_path: Path) -> Iterator[tuple[Any, str, EmbeddedBroker]]:
    zk = new_chroot(revive_zookeeper)
    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "b0", zk_connect=zk, num_partitions=2,
        zk_session_timeout=2.0, zk_connection_timeout=2.0,
    ) as b:
        yield revive_zookeeper, zk, b


def group_offsets(zk: str, group: str, topic: str) -> dict[tuple[int, int], int]:
    with Registry(zk) as r:
        return r.group_offsets(group, topic)


def wait_group(zk: str, group: str, topic: str, want: dict[tuple[int, int], int]) -> dict[
    tuple[int, int], int
]:
    """Group offsets once they equal ``want`` (or what they are after 30 s)."""
    deadline = time.monotonic() + 30
    got: dict[tuple[int, int], int] = {}
    while time.monotonic() < deadline:
        got = group_offsets(zk, group, topic)
        if got == want:
            break
        time.sleep(0.2)
    return got


def log_ends(broker: EmbeddedBroker, topic: str) -> dict[tuple[int, int], int]:
    return {(broker.broker_id, p): broker.log_end(topic, p) or 0 for p in range(2)}


def fault_begin(server: Any, fault: str) -> None:
    if fault == "pause":
        server.pause()
    else:
        server.halt()


def fault_end(server: Any, fault: str) -> None:
    if fault == "pause":
        server.resume()
    else:
        server.start()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("fault", "commit"), [("stop", True), ("pause", True), ("restart", False)]
)
def test_stream_goes_on_through_zookeeper_outage(
    spark: SparkSession, zk_broker: tuple[Any, str, EmbeddedBroker], tmp_path: Path,
    record: Recorder, fault: str, commit: bool,
) -> None:
    """Rows produced before, during and after the outage all arrive exactly once; with
    commitToGroup the group offsets reach the log ends after ZooKeeper is back."""
    server, zk, broker = zk_broker
    topic = f"o{uuid.uuid4().hex[:8]}"
    group = f"g{uuid.uuid4().hex[:6]}"
    sent = produce(broker, topic, {0: values("a0", 5), 1: values("a1", 5)})
    broker.wait_for_topic(topic)
    opts = {**SHORT_ZK, "subscribe": topic, "startingOffsets": "earliest"}
    if commit:
        opts.update({"commitToGroup": "true", "group.id": group})
    q = stream_query(spark, zk, tmp_path / "cp", tmp_path / "sink", **opts)
    try:
        q.processAllAvailable()
        began = time.monotonic()
        fault_begin(server, fault)
        if fault == "restart":
            time.sleep(1.0)
            fault_end(server, fault)
        sent += produce(broker, topic, {0: values("b0", 7), 1: values("b1", 3)}, "gzip")
        q.processAllAvailable()
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - began)))
        sent += produce(broker, topic, {0: values("c0", 4), 1: values("c1", 6)}, "snappy")
        q.processAllAvailable()
        if fault != "restart":
            fault_end(server, fault)
        sent += produce(broker, topic, {0: values("d0", 2), 1: values("d1", 2)})
        # a restart may expire the broker's session: see the test below
        drain(spark, q, tmp_path / "sink", len(sent))
        assert q.exception() is None
        if commit:
            want = log_ends(broker, topic)
            assert wait_group(zk, group, topic, want) == want
    finally:
        q.stop()
    got = read_sink(spark, tmp_path / "sink")
    record(f"ZooKeeper {fault} {OUTAGE_S} s mid-stream"
           + (", commitToGroup" if commit else ""), expected=sent, got=got)
    assert sorted(got) == sorted(sent)


@pytest.mark.spark
def test_stream_reads_a_broker_again_after_its_session_expired(
    spark: SparkSession, zk_broker: tuple[Any, str, EmbeddedBroker], tmp_path: Path,
    record: Recorder,
) -> None:
    """The broker's session expires (ZooKeeper up): until it has registered again the stream
    keeps its offsets and reads nothing new from it; the rows sent in that window arrive once
    it is back, exactly once."""
    _server, zk, broker = zk_broker
    topic = f"e{uuid.uuid4().hex[:8]}"
    sent = produce(broker, topic, {0: values("a0", 5), 1: values("a1", 5)})
    broker.wait_for_topic(topic)
    opts = {**SHORT_ZK, "subscribe": topic, "startingOffsets": "earliest"}
    q = stream_query(spark, zk, tmp_path / "cp", tmp_path / "sink", **opts)
    try:
        q.processAllAvailable()
        expire_broker_session(broker, zk)
        sent += produce(broker, topic, {0: values("b0", 3), 1: values("b1", 4)}, "gzip")
        drain(spark, q, tmp_path / "sink", len(sent))
        assert q.exception() is None
    finally:
        q.stop()
    got = read_sink(spark, tmp_path / "sink")
    record("broker's ZooKeeper session expired mid-stream", expected=sent, got=got)
    assert sorted(got) == sorted(sent)


def _reader(zk: str, topic: str, **extra: str) -> Any:
    from kafka_pyspark._spark.schema import READ_SCHEMA
    from kafka_pyspark._spark.stream.reader import Kafka07StreamReader

    options = {"zk.connect": zk, "subscribe": topic, "startingOffsets": "earliest",
               **SHORT_ZK, **extra}
    return Kafka07StreamReader(options, READ_SCHEMA)


def test_outage_warns_once_and_defers_commits(
    zk_broker: tuple[Any, str, EmbeddedBroker], caplog: pytest.LogCaptureFixture,
) -> None:
    """The reader itself (the driver side, no Spark): during an outage latestOffset goes on
    with the last view and logs one warning; a commit waits and the newest one is written
    when ZooKeeper is back."""
    server, zk, broker = zk_broker
    topic = f"w{uuid.uuid4().hex[:8]}"
    group = f"g{uuid.uuid4().hex[:6]}"
    produce(broker, topic, {0: values("a", 3), 1: values("b", 2)})
    broker.wait_for_topic(topic)
    reader = _reader(zk, topic, commitToGroup="true", **{"group.id": group})
    try:
        start = reader.initialOffset()
        end1 = reader.latestOffset(start, ReadAllAvailable())
        caplog.set_level(logging.INFO, logger="kafka_pyspark")
        server.halt()
        produce(broker, topic, {0: values("c", 4)})
        reader.commit(end1)  # deferred: ZooKeeper is away
        end2 = reader.latestOffset(end1, ReadAllAvailable())
        end3 = reader.latestOffset(end2, ReadAllAvailable())
        assert end2 == end3 == {topic: {"0-0": broker.log_end(topic, 0),
                                        "0-1": broker.log_end(topic, 1)}}
        assert end2 != end1
        reader.commit(end2)
        warnings = [r for r in caplog.records if "is not answering" in r.getMessage()]
        assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
        assert "zk.outage.max.ms=600000" in warnings[0].getMessage()
        assert group_offsets_or_none(zk, group, topic) is None  # nothing written yet
        server.start()
        want = {(0, 0): end2[topic]["0-0"], (0, 1): end2[topic]["0-1"]}
        got: dict[tuple[int, int], int] = {}
        deadline = time.monotonic() + 30
        while got != want and time.monotonic() < deadline:
            assert reader.latestOffset(end2, ReadAllAvailable()) == end2  # commits end2
            got = group_offsets(zk, group, topic)
            time.sleep(0.2)
        assert got == want  # the newest end, not end1
        assert any("answers again" in r.getMessage() for r in caplog.records)
    finally:
        reader.stop()


def group_offsets_or_none(zk: str, group: str, topic: str) -> dict[tuple[int, int], int] | None:
    """None while ZooKeeper is away (and so nothing can have been written)."""
    try:
        with Registry(zk, session_timeout_ms=1000, connection_timeout_ms=1000) as r:
            return r.group_offsets(group, topic)
    except RegistryUnavailableError:
        return None


@pytest.mark.parametrize("bound_ms", [0, 3000])
def test_outage_past_the_bound_fails_naming_the_option(
    zk_broker: tuple[Any, str, EmbeddedBroker], bound_ms: int,
) -> None:
    """zk.outage.max.ms=0 fails at the first failed ZooKeeper call; 3000 once the outage is
    older than 3 s; both name ZooKeeper and the option."""
    server, zk, broker = zk_broker
    topic = f"z{uuid.uuid4().hex[:8]}"
    produce(broker, topic, {0: values("a", 1)})
    broker.wait_for_topic(topic)
    reader = _reader(zk, topic, **{"zk.outage.max.ms": str(bound_ms)})
    try:
        start = reader.initialOffset()
        server.halt()
        with pytest.raises(RegistryUnavailableError) as info:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                reader.latestOffset(start, ReadAllAvailable())
                time.sleep(0.3)
        assert f"zk.outage.max.ms={bound_ms}" in str(info.value)
        assert server.connect_string in str(info.value)
    finally:
        reader.stop()
