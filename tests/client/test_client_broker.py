"""The client against the real embedded 0.7 broker (kafka_pyspark.testing.broker).

Most tests run the broker without ZooKeeper (fast); the Producer test across two brokers uses
the ``brokers`` fixture (real ZooKeeper).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_pyspark import _wire as wire
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark.client import (
    BrokerConnection,
    DeliveryCount,
    FetchSettings,
    OffsetRange,
    Producer,
    before_time,
    earliest,
    iter_multi_range,
    iter_range,
    latest,
    probe_partition_count,
    segment_starts,
)
from kafka_pyspark.errors import (
    BrokerConnectionError,
    DataNotAvailableError,
    FetchSizeTooSmallError,
    MessageError,
    OffsetOutOfRangeError,
    UnknownError,
    WrongPartitionError,
)
from kafka_pyspark.testing.broker import EmbeddedBroker


def make_broker(tmp_path: Path, **kw: Any) -> EmbeddedBroker:
    args: dict[str, Any] = {"zk_connect": None, "log_dir": tmp_path / "b0", "num_partitions": 2}
    args.update(kw)
    return EmbeddedBroker(**args)


@pytest.fixture
def eb(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with make_broker(tmp_path) as b:
        yield b


def connect(b: EmbeddedBroker, **kw: Any) -> BrokerConnection:
    args: dict[str, Any] = {"timeout": 5.0, "retries": 1, "backoff": 0.01,
                            "broker_id": b.broker_id}
    args.update(kw)
    return BrokerConnection(b.host, b.port, **args)


def values_of(results: Any) -> list[bytes]:
    return [v for r in results for v in r.batch.column("value").to_pylist()]


def produce_confirmed(conn: BrokerConnection, topic: str, partition: int, data: bytes) -> None:
    conn.produce(topic, partition, data)
    conn.barrier(topic, partition)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_produce_each_codec_and_fetch_back_byte_exact(eb: EmbeddedBroker, codec: str) -> None:
    vals = [f"value-{i}".encode() * (i + 1) for i in range(20)]
    data = encode_message_set(vals, compression=codec)
    with connect(eb) as c:
        produce_confirmed(c, "codecs", 1, data)
        assert latest(c, "codecs", 1) == len(data)
        r = c.fetch("codecs", 1, 0, 1 << 20)
        assert r.error == 0 and bytes(r.messages) == data
        results = list(iter_range(c, "codecs", 1, 0, len(data)))
        assert values_of(results) == vals
        assert set(results[0].batch.column("compression").to_pylist()) == {codec}


def test_range_larger_than_one_fetch_and_one_segment(tmp_path: Path) -> None:
    vals = [bytes([97 + i % 26]) * (20 + i % 13) for i in range(300)]
    with make_broker(tmp_path, log_file_size=1500) as b, connect(b) as c:
        for i in range(0, 300, 10):  # one request per 10 messages: segments roll between them
            c.produce("big", 0, encode_message_set(vals[i : i + 10]))
        c.barrier("big", 0)
        starts, end = segment_starts(c, "big", 0)
        assert len(starts) > 3 and starts[0] == 0
        assert earliest(c, "big", 0) == 0 and latest(c, "big", 0) == end
        assert before_time(c, "big", 0, int(time.time() * 1000) + 60_000) == end
        assert before_time(c, "big", 0, 0) is None
        results = list(iter_range(c, "big", 0, 0, end, FetchSettings(fetch_size=256)))
        assert values_of(results) == vals
        offsets = [o for r in results for o in r.batch.column("offset").to_pylist()]
        assert offsets == sorted(offsets) and offsets[0] == 0
        assert all(x in offsets for x in starts)  # segment starts are message boundaries
        assert results[-1].next_offset == end
        # A range between two segment starts reads exactly that segment's messages.
        seg = list(iter_range(c, "big", 0, starts[1], starts[2], FetchSettings(fetch_size=100)))
        first = [o for r in seg for o in r.batch.column("offset").to_pylist()]
        assert first[0] == starts[1] and seg[-1].next_offset == starts[2]


def test_fetch_size_doubling_and_ceiling(eb: EmbeddedBroker) -> None:
    vals = [b"small", b"L" * 50_000, b"tail"]
    with connect(eb) as c:
        data = b"".join(encode_message_set([v]) for v in vals)
        produce_confirmed(c, "large", 0, data)
        results = list(iter_range(c, "large", 0, 0, len(data), FetchSettings(fetch_size=1024,
                                  max_fetch_size=1 << 20)))
        assert values_of(results) == vals
        with pytest.raises(FetchSizeTooSmallError) as ei:
            list(iter_range(c, "large", 0, 0, len(data),
                            FetchSettings(fetch_size=1024, max_fetch_size=8192)))
        msg = str(ei.value)
        first = len(encode_message_set([vals[0]]))
        assert "topic 'large', broker 0, partition 0" in msg and f"offset {first}" in msg
        assert f"{len(encode_message_set([vals[1]]))} bytes" in msg


def test_offset_out_of_range_wrong_partition_and_unknown(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        data = encode_message_set([b"a", b"b", b"c"])
        produce_confirmed(c, "t", 0, data)
        assert c.fetch("t", 0, len(data), 100).error == 0  # exactly at the end: empty
        assert c.fetch("t", 0, len(data) + 1, 100).error == 1
        assert c.fetch("t", 0, -1, 100).error == 1
        with pytest.raises(OffsetOutOfRangeError, match=f"offset {len(data) + 10}"):
            list(iter_range(c, "t", 0, len(data) + 10, len(data) + 20))
        with pytest.raises(WrongPartitionError, match="partition 2"):
            list(iter_range(c, "t", 2, 0, 10))
        with pytest.raises(UnknownError):  # 0.7.2: empty topic -> InvalidTopicException
            list(iter_range(c, "", 0, 0, 10))


def test_offset_inside_a_message_fails_clearly(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        data = encode_message_set([b"x" * 100, b"y" * 100])
        produce_confirmed(c, "t", 1, data)
        with pytest.raises((MessageError, FetchSizeTooSmallError), match="partition 1"):
            list(iter_range(c, "t", 1, 5, len(data)))


def test_multifetch_layout(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        a, b = encode_message_set([b"1", b"22", b"333"]), encode_message_set([b"x"])
        c.produce("m", 0, a)
        c.produce("m", 1, b)
        c.barrier("m", 0)
        got = c.multifetch([
            wire.FetchRequest("m", 0, 0, 1000),
            wire.FetchRequest("m", 1, 0, 1000),
            wire.FetchRequest("m", 5, 0, 1000),
            wire.FetchRequest("m", 0, 10_000, 1000),
        ])
        assert [(r.error, bytes(r.messages)) for r in got] == [
            (0, a), (0, b), (3, b""), (1, b"")
        ]
        per: dict[int, list[bytes]] = {0: [], 1: []}
        for i, r in iter_multi_range(c, [OffsetRange("m", eb.broker_id, 0, 0, len(a)),
                                         OffsetRange("m", eb.broker_id, 1, 0, len(b))],
                                     FetchSettings(fetch_size=8)):
            per[i] += r.batch.column("value").to_pylist()
        assert per == {0: [b"1", b"22", b"333"], 1: [b"x"]}


def test_barrier_and_unconfirmed_counters(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        data = encode_message_set([b"p"] * 5)
        c.produce("bar", 1, data)
        c.multiproduce([wire.ProduceRequest("bar", 0, data), wire.ProduceRequest("bar", 1, data)])
        assert (c.unconfirmed_requests, c.unconfirmed_bytes) == (2, 3 * len(data))
        c.barrier("bar", 1)
        assert (c.unconfirmed_requests, c.unconfirmed_bytes) == (0, 0)
        assert latest(c, "bar", 1) == 2 * len(data) and latest(c, "bar", 0) == len(data)


def test_rejected_produce_fails_the_barrier(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        c.produce("rej", 7, encode_message_set([b"bad partition"]))  # broker closes
        with pytest.raises(BrokerConnectionError, match="may not have been appended"):
            c.barrier("rej", 0)
        produce_confirmed(c, "rej", 0, encode_message_set([b"fine"]))  # usable again


def test_broker_stopped_before_barrier(eb: EmbeddedBroker) -> None:
    with connect(eb) as c:
        data = encode_message_set([b"maybe"])
        c.produce("stop", 0, data)
        eb.stop()
        with pytest.raises(BrokerConnectionError) as ei:
            c.barrier("stop", 0)
        assert f"{len(data)} bytes in 1 produce requests" in str(ei.value)
        assert "may not have been appended" in str(ei.value)


def test_producer_survives_a_broker_restart_between_flushes(eb: EmbeddedBroker) -> None:
    one, two = encode_message_set([b"before"]), encode_message_set([b"after"])
    with Producer({0: (eb.host, eb.port)}, timeout=5.0, retries=3, backoff=0.05) as p:
        p.send(0, "rs", 1, one)
        assert p.flush() == {("rs", 0, 1): DeliveryCount(1, len(one))}
        eb.restart()
        p.send(0, "rs", 1, two)
        assert p.flush() == {("rs", 0, 1): DeliveryCount(1, len(two))}
    with connect(eb) as c:
        assert values_of(iter_range(c, "rs", 1, 0, len(one) + len(two))) == [b"before", b"after"]


def test_probe_partition_count_and_offsets_on_a_bad_partition(tmp_path: Path) -> None:
    with make_broker(tmp_path, topic_partitions={"five": 5}) as b, connect(b, retries=1) as c:
        assert probe_partition_count(c, "five") == 5
        assert probe_partition_count(c, "never-written") == 2
        with pytest.raises(BrokerConnectionError, match="partition 9 of topic 'five' does not"):
            c.offsets("five", 9, -1, 1)
        assert c.offsets("five", 4, -1, 1) == [0]  # reconnected; unwritten partition


def test_unflushed_data_is_not_read_and_fails_clearly(tmp_path: Path) -> None:
    with make_broker(tmp_path, flush_interval=10_000, flush_interval_ms=600_000) as b, \
            connect(b, retries=2) as c:
        data = encode_message_set([b"u1", b"u2"])
        produce_confirmed(c, "unflushed", 0, data)  # appended, not flushed
        assert latest(c, "unflushed", 0) == 0  # "latest" is the flushed end
        assert c.fetch("unflushed", 0, 0, 1000) == wire.FetchResponse(0, b"")
        with pytest.raises(DataNotAvailableError, match="latest \\(flushed\\) offset is 0"):
            list(iter_range(c, "unflushed", 0, 0, len(data)))
        b.flush()
        assert values_of(iter_range(c, "unflushed", 0, 0, len(data))) == [b"u1", b"u2"]


@pytest.mark.zk
def test_producer_across_two_registered_brokers(brokers: list[EmbeddedBroker]) -> None:
    b0, b1 = brokers
    sets = {(0, p): encode_message_set([f"{p}".encode()] * 3, compression="gzip")
            for p in range(2)}
    sets.update({(1, p): encode_message_set([f"b1-{p}".encode()]) for p in range(3)})
    with Producer({0: (b0.host, b0.port), 1: (b1.host, b1.port)}, timeout=5.0) as p:
        for (bid, part), data in sets.items():
            p.send(bid, "two", part, data)
        got = p.flush()
    assert got == {("two", bid, part): DeliveryCount(1, len(d)) for (bid, part), d in sets.items()}
    for bid, b in enumerate(brokers):
        with connect(b) as c:
            assert probe_partition_count(c, "two") == (2, 3)[bid]
            for part in range((2, 3)[bid]):
                assert latest(c, "two", part) == len(sets[(bid, part)])
