"""Every line of BROKER-FACTS.md (a real 0.7.2 broker, byte for byte) against EmbeddedBroker.

Raw sockets; expected bytes written by hand. No ZooKeeper here (see test_broker_zookeeper.py).
"""

from __future__ import annotations

import gzip
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bytes import gzip_wrapper, message, snappy_java_stream
from test_broker_helpers import THREE, Conn, fetch_frame, wait_until

from kafka_pyspark import wire
from kafka_pyspark.testing.broker import EmbeddedBroker


@pytest.fixture
def b(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log_dir=tmp_path / "logs", num_partitions=2) as broker:
        yield broker


@pytest.fixture
def three(b: EmbeddedBroker) -> EmbeddedBroker:
    """Topic t, partition 0: three 17-byte messages at 0, 17, 34; log end 51."""
    with Conn(b) as c:
        c.produce("t", 0, THREE)
        c.barrier()
    return b


def stored(b: EmbeddedBroker, topic: str, partition: int) -> bytes:
    with Conn(b) as c:
        frame = c.fetch(topic, partition, 0, 1 << 20)
    assert frame[4:6] == b"\x00\x00"
    return frame[6:]


def refused(b: EmbeddedBroker, data: bytes, topic: str = "t", partition: int = 0) -> bool:
    """Produce ``data``: True if the broker closed the connection (and answered nothing)."""
    with Conn(b) as c:
        c.produce(topic, partition, data)
        return c.closed_by_peer()


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


def test_flush_interval_one_is_immediate(b: EmbeddedBroker) -> None:
    with Conn(b) as c:
        c.produce("t", 0, THREE)
        assert c.fetch("t", 0, 0, 1000) == fetch_frame(0, THREE)


def test_pipelined_requests_answered_in_order(b: EmbeddedBroker) -> None:
    reqs: list[wire.Request] = [
        wire.ProduceRequest("t", 0, THREE),
        wire.FetchRequest("t", 0, 0, 100),
        wire.OffsetsRequest("t", 0, -1, 10),
        wire.ProduceRequest("t", 0, THREE[:17]),
        wire.FetchRequest("t", 0, 51, 100),
        wire.FetchRequest("t", 1, 0, 100),
        wire.OffsetsRequest("t", 0, -2, 10),
    ]
    with Conn(b) as c:
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


# --- PRODUCE -------------------------------------------------------------------------------


def test_produce_bad_crc_rejects_whole_request(b: EmbeddedBroker) -> None:
    good = message(b"good")
    bad = message(b"bad", crc=zlib.crc32(b"bad") ^ 1)
    assert refused(b, good + bad)
    assert stored(b, "t", 0) == b""
    assert refused(b, bad + good)
    assert stored(b, "t", 0) == b""


def test_produce_magic0_accepted_byte_identical(b: EmbeddedBroker) -> None:
    data = message(b"old-style", magic=0) + message(b"new-style") + message(b"", magic=0)
    with Conn(b) as c:
        c.produce("t", 0, data)
        c.barrier()
    assert stored(b, "t", 0) == data


@pytest.mark.parametrize("magic", [2, 3, 255])
def test_produce_unknown_magic_rejected(b: EmbeddedBroker, magic: int) -> None:
    assert refused(b, message(b"ok") + message(b"x", magic=magic))  # magic-1 layout
    assert stored(b, "t", 0) == b""


def test_produce_codec3_rejected(b: EmbeddedBroker) -> None:
    assert refused(b, message(THREE, codec=3))
    assert stored(b, "t", 0) == b""


def test_produce_partition_out_of_range_rejected(b: EmbeddedBroker) -> None:
    assert refused(b, THREE, partition=7)
    assert refused(b, THREE, partition=2)
    assert refused(b, THREE, partition=-2)
    assert not (b.log_dir / "t-7").exists()


def test_produce_partition_minus_one_picks_a_partition(b: EmbeddedBroker) -> None:
    with Conn(b) as c:
        for _ in range(20):
            c.produce("t", -1, THREE[:17])
        c.barrier()
    ends = [b.log_end("t", p) or 0 for p in range(2)]
    assert sum(ends) == 20 * 17
    assert all(e % 17 == 0 for e in ends)


def test_produce_truncated_tail_dropped_silently(b: EmbeddedBroker) -> None:
    with Conn(b) as c:
        c.produce("t", 0, THREE[:17] + THREE[17:30])  # a whole one, then 13 bytes of the next
        assert c.offsets("t", 0, -1, 10) == [17, 0]  # connection still open
        c.produce("t", 0, THREE[17:34] + b"\x00\x00")  # a whole one + 2 bytes (no length)
        assert c.offsets("t", 0, -1, 10) == [34, 0]
    assert stored(b, "t", 0) == THREE[:34]


def test_produce_first_message_truncated_is_refused(b: EmbeddedBroker) -> None:
    # 0.7.2 throws InvalidMessageSizeException when not even the first message is whole
    assert refused(b, THREE[:10])
    assert stored(b, "t", 0) == b""


def test_produce_empty_or_lengthless_set_stores_nothing(b: EmbeddedBroker) -> None:
    with Conn(b) as c:
        c.produce("t", 0, b"")
        c.produce("t", 0, b"\x00\x00")
        assert c.offsets("t", 0, -1, 10) == [0]


def test_unknown_request_type_closes(b: EmbeddedBroker) -> None:
    with Conn(b) as c:
        c.send(struct.pack(">ih", 8, 99) + b"\x00\x01t\x00\x00\x00")
        assert c.closed_by_peer()


# --- compression ---------------------------------------------------------------------------


def test_gzip_wrapper_stored_with_and_without_mtime(b: EmbeddedBroker) -> None:
    w1 = gzip_wrapper(THREE, mtime=0)
    w2 = gzip_wrapper(THREE, mtime=1_700_000_000)
    with Conn(b) as c:
        c.produce("t", 0, w1 + w2)
        c.barrier()
    assert stored(b, "t", 0) == w1 + w2


def test_gzip_as_0_7_2_producer_writes_it_stored(b: EmbeddedBroker) -> None:
    # 0.7.2's producer (java.util.zip.GZIPOutputStream): 1f8b 08 00 00000000 00 00, deflate,
    # CRC32 and ISIZE little-endian -> `00000031 01 01 <crc> 1f8b0800000000000000...`
    deflate = zlib.compressobj(wbits=-15)
    body = deflate.compress(THREE) + deflate.flush()
    payload = (
        bytes.fromhex("1f8b0800000000000000")
        + body
        + struct.pack("<II", zlib.crc32(THREE), len(THREE))
    )
    w = message(payload, codec=1)
    assert w[4:6] == b"\x01\x01" and w[10:20] == bytes.fromhex("1f8b0800000000000000")
    with Conn(b) as c:
        c.produce("t", 0, w + message(b"after"))
        c.barrier()
    assert stored(b, "t", 0) == w + message(b"after")


def test_zlib_without_gzip_header_rejected(b: EmbeddedBroker) -> None:
    assert refused(b, message(zlib.compress(THREE), codec=1))


def test_snappy_java_stream_stored(b: EmbeddedBroker) -> None:
    w = message(snappy_java_stream(THREE), codec=2)
    with Conn(b) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(b, "t", 0) == w


def test_raw_snappy_block_stored(b: EmbeddedBroker) -> None:
    import snappy

    w = message(snappy.compress(THREE), codec=2)
    with Conn(b) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(b, "t", 0) == w


def test_snappy_framing_format_rejected(b: EmbeddedBroker) -> None:
    import snappy

    framed = snappy.StreamCompressor().compress(THREE)
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert refused(b, message(framed, codec=2))


def test_gzip_wrapper_with_bad_inner_crc_rejected(b: EmbeddedBroker) -> None:
    inner = message(b"fine") + message(b"broken", crc=0)
    assert refused(b, gzip_wrapper(inner))
    assert stored(b, "t", 0) == b""


def test_gzip_inside_gzip_stored(b: EmbeddedBroker) -> None:
    w = gzip_wrapper(gzip_wrapper(THREE) + message(b"plain"))
    with Conn(b) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(b, "t", 0) == w


def test_gzip_garbage_rejected(b: EmbeddedBroker) -> None:
    assert refused(b, message(b"\x1f\x8b\x08\x00 not really gzip", codec=1))
    assert refused(b, message(gzip.compress(THREE)[:-6], codec=1))


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


# --- MULTIPRODUCE --------------------------------------------------------------------------


def test_multiproduce_stores_every_item(b: EmbeddedBroker) -> None:
    req = wire.MultiProduceRequest(
        (
            wire.ProduceRequest("t", 0, THREE[:17]),
            wire.ProduceRequest("t", 1, THREE[17:]),
            wire.ProduceRequest("u", 0, THREE),
            wire.ProduceRequest("t", 0, THREE[17:34]),
        )
    )
    with Conn(b) as c:
        c.request(req)
        c.barrier()
    assert stored(b, "t", 0) == THREE[:34]
    assert stored(b, "t", 1) == THREE[17:]
    assert stored(b, "u", 0) == THREE


def test_multiproduce_bad_item_closes_after_earlier_items(b: EmbeddedBroker) -> None:
    # 0.7.2 handles the items in order; the bad one throws and closes the connection
    bad = message(b"bad", crc=1)
    req = wire.MultiProduceRequest(
        (
            wire.ProduceRequest("t", 0, THREE[:17]),
            wire.ProduceRequest("t", 1, bad),
            wire.ProduceRequest("u", 0, THREE),
        )
    )
    with Conn(b) as c:
        c.request(req)
        assert c.closed_by_peer()
    assert stored(b, "t", 0) == THREE[:17]
    assert stored(b, "t", 1) == b""
    assert stored(b, "u", 0) == b""
    assert b.log_end("u", 0) is None


# --- max.message.size ----------------------------------------------------------------------


def test_oversize_message_set_dropped_connection_kept(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path, max_message_size=100) as b, Conn(b) as c:
        c.produce("t", 0, message(b"small") + message(b"x" * 101))
        assert c.offsets("t", 0, -1, 10) == [0]  # dropped, connection open
        c.produce("t", 0, message(b"x" * 100))  # payload == limit: fine
        assert c.offsets("t", 0, -1, 10) == [110, 0]
        # the limit applies to the (compressed) payload of the wrapper, not inner messages
        w = gzip_wrapper(message(b"a" * 400))
        c.produce("t", 0, w)
        assert c.offsets("t", 0, -1, 10) == [110 + len(w), 0]
