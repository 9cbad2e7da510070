"""docs/dev/PROTOCOL.md "A real 0.7.2 broker, measured" against EmbeddedBroker: what a client
reads - visibility after flushes, FETCH, OFFSETS, MULTIFETCH (the writes:
test_broker_facts_write.py).

Raw sockets; expected bytes written by hand. No ZooKeeper here (see test_broker_zookeeper.py);
the ``bare_broker`` fixture (tests/conftest.py) is a broker without it.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from _broker_raw import THREE, Conn, fetch_frame, wait_until
from _bytes import gzip_wrapper

from kafka_pyspark import _wire as wire
from kafka_pyspark.testing.broker import EmbeddedBroker


@pytest.fixture
def three(bare_broker: EmbeddedBroker) -> EmbeddedBroker:
    """Topic t, partition 0: three 17-byte messages at 0, 17, 34; log end 51."""
    with Conn(bare_broker) as c:
        c.produce("t", 0, THREE)
        c.barrier()
    return bare_broker


# --- Visibility ----------------------------------------------------------------------------


def test_unflushed_data_is_invisible_until_flushed(tmp_path: Path) -> None:
    # log.flush.interval=10000: FETCH right after PRODUCE is empty (error 0), OFFSETS latest [0]
    with EmbeddedBroker(
        log_dir=tmp_path, num_partitions=2, flush_interval=10000, flush_interval_ms=3_600_000
    ) as b, Conn(b) as c:
        c.produce("t", 0, THREE)
        assert c.fetch("t", 0, 0, 1000) == fetch_frame(0)
        assert c.offsets("t", 0, -1, 10) == [0]
        assert c.fetch("t", 0, 17, 1000) == fetch_frame(1)  # not there yet: out of range
        b.flush()
        assert c.fetch("t", 0, 0, 1000) == fetch_frame(0, THREE)
        assert c.offsets("t", 0, -1, 10) == [51, 0]


def test_flush_scheduler_makes_data_visible(tmp_path: Path) -> None:
    # ...and the 0.7.2 flush scheduler shows it later (here every 100 ms instead of 3 s)
    with EmbeddedBroker(
        log_dir=tmp_path, flush_interval=10000, flush_interval_ms=100
    ) as b, Conn(b) as c:
        c.produce("t", 0, THREE)
        assert wait_until(lambda: c.fetch("t", 0, 0, 1000) == fetch_frame(0, THREE))
        assert c.offsets("t", 0, -1, 10) == [51, 0]


def test_flush_interval_counts_messages(tmp_path: Path) -> None:
    with EmbeddedBroker(
        log_dir=tmp_path, flush_interval=3, flush_interval_ms=3_600_000
    ) as b, Conn(b) as c:
        c.produce("t", 0, THREE[:34])  # 2 messages: held back
        assert c.offsets("t", 0, -1, 10) == [0]
        c.produce("t", 0, THREE[34:])  # third message: flush
        assert c.offsets("t", 0, -1, 10) == [51, 0]


def test_flush_interval_counts_inner_messages(tmp_path: Path) -> None:
    with EmbeddedBroker(
        log_dir=tmp_path, flush_interval=3, flush_interval_ms=3_600_000
    ) as b, Conn(b) as c:
        w = gzip_wrapper(THREE[:34])  # one wrapper, 2 inner messages: held back
        c.produce("t", 0, w)
        assert c.offsets("t", 0, -1, 10) == [0]
        c.produce("t", 0, gzip_wrapper(THREE[34:]))  # 3rd inner message: flush
        assert c.offsets("t", 0, -1, 10) == [len(w) + len(gzip_wrapper(THREE[34:])), 0]


def test_flush_interval_one_is_immediate(bare_broker: EmbeddedBroker) -> None:
    with Conn(bare_broker) as c:
        c.produce("t", 0, THREE)
        assert c.fetch("t", 0, 0, 1000) == fetch_frame(0, THREE)


def test_pipelined_requests_answered_in_order(bare_broker: EmbeddedBroker) -> None:
    reqs: list[wire.Request] = [
        wire.ProduceRequest("t", 0, THREE),
        wire.FetchRequest("t", 0, 0, 100),
        wire.OffsetsRequest("t", 0, -1, 10),
        wire.ProduceRequest("t", 0, THREE[:17]),
        wire.FetchRequest("t", 0, 51, 100),
        wire.FetchRequest("t", 1, 0, 100),
        wire.OffsetsRequest("t", 0, -2, 10),
    ]
    with Conn(bare_broker) as c:
        c.send(b"".join(wire.encode_request(r) for r in reqs))  # PRODUCE answers nothing
        assert c.recv_frame() == fetch_frame(0, THREE)
        assert c.recv_frame() == wire.encode_offsets_response(0, [51, 0])
        assert c.recv_frame() == fetch_frame(0, THREE[:17])
        assert c.recv_frame() == fetch_frame(0)
        assert c.recv_frame() == wire.encode_offsets_response(0, [0])

# --- FETCH ---------------------------------------------------------------------------------


def test_fetch_whole_log_golden(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        frame = c.fetch("t", 0, 0, 1 << 20)
    assert frame[:6] == bytes.fromhex("00000035 0000")
    assert frame[6:] == THREE
    assert len(frame) == 6 + 51


def test_fetch_at_end_is_empty(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, 51, 1000) == bytes.fromhex("00000002 0000")


@pytest.mark.parametrize("offset", [52, 51 + 1000, -1])
def test_fetch_past_end_or_negative_is_offset_out_of_range(
    three: EmbeddedBroker, offset: int
) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, offset, 1000) == bytes.fromhex("00000002 0001")


@pytest.mark.parametrize("partition", [2, 7, -1])
def test_fetch_bad_partition_is_wrong_partition(three: EmbeddedBroker, partition: int) -> None:
    with Conn(three) as c:
        assert c.fetch("t", partition, 0, 1000) == bytes.fromhex("00000002 0003")
        assert c.fetch("never-seen", partition, 0, 1000) == bytes.fromhex("00000002 0003")


@pytest.mark.parametrize(("topic", "partition", "offset"), [("t", 1, 0), ("t", 1, 100),
                                                            ("nope", 0, 0), ("nope", 1, 5)])
def test_fetch_never_written_is_empty(
    three: EmbeddedBroker, topic: str, partition: int, offset: int
) -> None:
    with Conn(three) as c:
        assert c.fetch(topic, partition, offset, 1000) == bytes.fromhex("00000002 0000")


def test_fetch_inside_a_message_returns_raw_bytes(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, 5, 1000) == fetch_frame(0, THREE[5:])
        assert c.fetch("t", 0, 5, 1000)[:6] == bytes.fromhex("00000030 0000")


@pytest.mark.parametrize("max_size", [16, 4, 1, 0, 17, 50, 51, 52])
def test_fetch_max_size_truncates_body(three: EmbeddedBroker, max_size: int) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, 0, max_size) == fetch_frame(0, THREE[:max_size])
        assert c.fetch("t", 0, 17, max_size) == fetch_frame(0, THREE[17 : 17 + max_size])


def test_fetch_max_16_golden(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, 0, 16) == bytes.fromhex("00000012 0000") + THREE[:16]
        assert c.fetch("t", 0, 0, 4) == bytes.fromhex("00000006 0000 0000000d")
        assert c.fetch("t", 0, 0, 0) == bytes.fromhex("00000002 0000")


@pytest.mark.parametrize("max_size", [-1, -5, -(2**31)])
def test_fetch_negative_max_size_sends_header_then_closes(
    three: EmbeddedBroker, max_size: int
) -> None:
    with Conn(three) as c:
        c.request(wire.FetchRequest("t", 0, 0, max_size))
        # 0.7.2 announces sizeInBytes + 2 (negative max -> 2 + max), error 0, then fails
        assert c.recv_exact(6) == struct.pack(">ih", 2 + max_size, 0)
        assert c.closed_by_peer()


def test_fetch_negative_max_size_where_nothing_is_read_is_normal(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        assert c.fetch("t", 0, 51, -1) == fetch_frame(0)
        assert c.fetch("t", 0, 52, -1) == fetch_frame(1)
        assert c.fetch("t", 1, 0, -1) == fetch_frame(0)
        assert c.fetch("t", 0, 0, 10) == fetch_frame(0, THREE[:10])


def test_fetch_empty_topic_name_is_unknown_error(three: EmbeddedBroker) -> None:
    with Conn(three) as c:  # 0.7.2: InvalidTopicException -> UnknownCode (-1)
        assert c.fetch("", 0, 0, 100) == bytes.fromhex("00000002 ffff")

# --- OFFSETS -------------------------------------------------------------------------------


def test_offsets_earliest_latest_time(three: EmbeddedBroker) -> None:
    now_ms = int(time.time() * 1000)
    with Conn(three) as c:
        assert c.offsets("t", 0, -2, 10) == [0]
        assert c.offsets("t", 0, -1, 10) == [51, 0]
        assert c.offsets("t", 0, now_ms + 60_000, 10) == [51, 0]
        assert c.offsets("t", 0, 0, 10) == []
        assert c.offsets("t", 0, -1, 1) == [51]
        assert c.offsets("t", 0, -1, 0) == []


def test_offsets_latest_golden_bytes(three: EmbeddedBroker) -> None:
    with Conn(three) as c:
        c.request(wire.OffsetsRequest("t", 0, -1, 10))
        assert c.recv_frame() == bytes.fromhex(
            "00000016 0000 00000002 0000000000000033 0000000000000000"
        )


@pytest.mark.parametrize(("topic", "partition"), [("nope", 0), ("t", 1)])
def test_offsets_unknown_topic_or_unwritten_partition(
    three: EmbeddedBroker, topic: str, partition: int
) -> None:
    with Conn(three) as c:
        assert c.offsets(topic, partition, -1, 10) == [0]
        assert c.offsets(topic, partition, -2, 10) == [0]
        # 0.7.2 Log.getEmptyOffsets: any other time -> no offsets
        assert c.offsets(topic, partition, int(time.time() * 1000) + 60_000, 10) == []


@pytest.mark.parametrize(("topic", "partition"), [("t", 5), ("t", 2), ("t", -1), ("nope", 9)])
def test_offsets_invalid_partition_closes_without_answer(
    three: EmbeddedBroker, topic: str, partition: int
) -> None:
    with Conn(three) as c:
        c.request(wire.OffsetsRequest(topic, partition, -1, 10))
        assert c.closed_by_peer()


def test_offsets_negative_max_number_closes(three: EmbeddedBroker) -> None:
    with Conn(three) as c:  # 0.7.2: NegativeArraySizeException in getOffsetsBefore
        c.request(wire.OffsetsRequest("t", 0, -1, -1))
        assert c.closed_by_peer()

# --- MULTIFETCH ----------------------------------------------------------------------------


def test_multifetch_golden(three: EmbeddedBroker) -> None:
    req = wire.MultiFetchRequest(
        (
            wire.FetchRequest("t", 0, 0, 1000),
            wire.FetchRequest("t", 0, 17, 30),
            wire.FetchRequest("t", 2, 0, 1000),
            wire.FetchRequest("t", 0, 52, 1000),
        )
    )
    # request layout: int32 len | int16 2 | int16 count | per fetch: topic, partition, offset,
    # max size (no top-level topic/partition)
    raw = wire.encode_request(req)
    assert raw[4:8] == bytes.fromhex("0002 0004")
    assert raw[8:11] == b"\x00\x01t"
    with Conn(three) as c:
        c.send(raw)
        frame = c.recv_frame()
    expected = (
        bytes.fromhex("0000006b 0000")
        + bytes.fromhex("00000035 0000") + THREE
        + bytes.fromhex("00000020 0000") + THREE[17:47]
        + bytes.fromhex("00000002 0003")
        + bytes.fromhex("00000002 0001")
    )
    assert frame == expected


def test_multifetch_mixed_topics_and_empty(three: EmbeddedBroker) -> None:
    req = wire.MultiFetchRequest(
        (
            wire.FetchRequest("nope", 0, 0, 1000),
            wire.FetchRequest("t", 0, 51, 1000),
            wire.FetchRequest("t", 0, 5, 3),
        )
    )
    with Conn(three) as c:
        c.request(req)
        frame = c.recv_frame()
        c.request(wire.MultiFetchRequest(()))
        empty = c.recv_frame()
    assert frame == (
        struct.pack(">ih", 2 + 6 + 6 + 9, 0)
        + fetch_frame(0) + fetch_frame(0) + fetch_frame(0, THREE[5:8])
    )
    assert empty == bytes.fromhex("00000002 0000")


def test_multifetch_negative_max_size_closes_after_header(three: EmbeddedBroker) -> None:
    req = wire.MultiFetchRequest(
        (wire.FetchRequest("t", 0, 0, 17), wire.FetchRequest("t", 0, 0, -3))
    )
    with Conn(three) as c:
        c.request(req)
        head = c.recv_exact(6 + 6 + 17 + 6)
        assert head == (
            struct.pack(">ih", 2 + (6 + 17) + (6 - 3), 0)
            + fetch_frame(0, THREE[:17])
            + struct.pack(">ih", 2 - 3, 0)
        )
        assert c.closed_by_peer()
