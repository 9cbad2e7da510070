"""docs/dev/PROTOCOL.md "A real 0.7.2 broker, measured" against EmbeddedBroker: what a client
writes - PRODUCE, compression, MULTIPRODUCE, max.message.size (the reads:
test_broker_facts_read.py).

Raw sockets; expected bytes written by hand. No ZooKeeper here (see test_broker_zookeeper.py);
the ``bare_broker`` fixture (tests/conftest.py) is a broker without it.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import pytest
from _broker_raw import THREE, Conn
from _bytes import gzip_wrapper, message, snappy_java_stream

from kafka_pyspark import _wire as wire
from kafka_pyspark.testing.broker import EmbeddedBroker


def stored(bare_broker: EmbeddedBroker, topic: str, partition: int) -> bytes:
    with Conn(bare_broker) as c:
        frame = c.fetch(topic, partition, 0, 1 << 20)
    assert frame[4:6] == b"\x00\x00"
    return frame[6:]


def refused(bare_broker: EmbeddedBroker, data: bytes, topic: str = "t", partition: int = 0) -> bool:
    """Produce ``data``: True if the broker closed the connection (and answered nothing)."""
    with Conn(bare_broker) as c:
        c.produce(topic, partition, data)
        return c.closed_by_peer()


# --- PRODUCE -------------------------------------------------------------------------------


def test_produce_bad_crc_rejects_whole_request(bare_broker: EmbeddedBroker) -> None:
    good = message(b"good")
    bad = message(b"bad", crc=zlib.crc32(b"bad") ^ 1)
    assert refused(bare_broker, good + bad)
    assert stored(bare_broker, "t", 0) == b""
    assert refused(bare_broker, bad + good)
    assert stored(bare_broker, "t", 0) == b""


def test_produce_magic0_accepted_byte_identical(bare_broker: EmbeddedBroker) -> None:
    data = message(b"old-style", magic=0) + message(b"new-style") + message(b"", magic=0)
    with Conn(bare_broker) as c:
        c.produce("t", 0, data)
        c.barrier()
    assert stored(bare_broker, "t", 0) == data


@pytest.mark.parametrize("magic", [2, 3, 255])
def test_produce_unknown_magic_rejected(bare_broker: EmbeddedBroker, magic: int) -> None:
    assert refused(bare_broker, message(b"ok") + message(b"x", magic=magic))  # magic-1 layout
    assert stored(bare_broker, "t", 0) == b""


def test_produce_codec3_rejected(bare_broker: EmbeddedBroker) -> None:
    assert refused(bare_broker, message(THREE, codec=3))
    assert stored(bare_broker, "t", 0) == b""


def test_produce_partition_out_of_range_rejected(bare_broker: EmbeddedBroker) -> None:
    assert refused(bare_broker, THREE, partition=7)
    assert refused(bare_broker, THREE, partition=2)
    assert refused(bare_broker, THREE, partition=-2)
    assert not (bare_broker.log_dir / "t-7").exists()


def test_produce_partition_minus_one_picks_a_partition(bare_broker: EmbeddedBroker) -> None:
    with Conn(bare_broker) as c:
        for _ in range(20):
            c.produce("t", -1, THREE[:17])
        c.barrier()
    ends = [bare_broker.log_end("t", p) or 0 for p in range(2)]
    assert sum(ends) == 20 * 17
    assert all(e % 17 == 0 for e in ends)


def test_produce_truncated_tail_dropped_silently(bare_broker: EmbeddedBroker) -> None:
    with Conn(bare_broker) as c:
        c.produce("t", 0, THREE[:17] + THREE[17:30])  # a whole one, then 13 bytes of the next
        assert c.offsets("t", 0, -1, 10) == [17, 0]  # connection still open
        c.produce("t", 0, THREE[17:34] + b"\x00\x00")  # a whole one + 2 bytes (no length)
        assert c.offsets("t", 0, -1, 10) == [34, 0]
    assert stored(bare_broker, "t", 0) == THREE[:34]


def test_produce_first_message_truncated_is_refused(bare_broker: EmbeddedBroker) -> None:
    # 0.7.2 throws InvalidMessageSizeException when not even the first message is whole
    assert refused(bare_broker, THREE[:10])
    assert stored(bare_broker, "t", 0) == b""


def test_produce_empty_or_lengthless_set_stores_nothing(bare_broker: EmbeddedBroker) -> None:
    with Conn(bare_broker) as c:
        c.produce("t", 0, b"")
        c.produce("t", 0, b"\x00\x00")
        assert c.offsets("t", 0, -1, 10) == [0]


def test_unknown_request_type_closes(bare_broker: EmbeddedBroker) -> None:
    with Conn(bare_broker) as c:
        c.send(struct.pack(">ih", 8, 99) + b"\x00\x01t\x00\x00\x00")
        assert c.closed_by_peer()

# --- compression ---------------------------------------------------------------------------


def test_gzip_wrapper_stored_with_and_without_mtime(bare_broker: EmbeddedBroker) -> None:
    w1 = gzip_wrapper(THREE, mtime=0)
    w2 = gzip_wrapper(THREE, mtime=1_700_000_000)
    with Conn(bare_broker) as c:
        c.produce("t", 0, w1 + w2)
        c.barrier()
    assert stored(bare_broker, "t", 0) == w1 + w2


def test_gzip_as_0_7_2_producer_writes_it_stored(bare_broker: EmbeddedBroker) -> None:
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
    with Conn(bare_broker) as c:
        c.produce("t", 0, w + message(b"after"))
        c.barrier()
    assert stored(bare_broker, "t", 0) == w + message(b"after")


def test_zlib_without_gzip_header_rejected(bare_broker: EmbeddedBroker) -> None:
    assert refused(bare_broker, message(zlib.compress(THREE), codec=1))


def test_snappy_java_stream_stored(bare_broker: EmbeddedBroker) -> None:
    w = message(snappy_java_stream(THREE), codec=2)
    with Conn(bare_broker) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(bare_broker, "t", 0) == w


def test_raw_snappy_block_stored(bare_broker: EmbeddedBroker) -> None:
    import snappy

    w = message(snappy.compress(THREE), codec=2)
    with Conn(bare_broker) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(bare_broker, "t", 0) == w


def test_snappy_framing_format_rejected(bare_broker: EmbeddedBroker) -> None:
    import snappy

    framed = snappy.StreamCompressor().compress(THREE)
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert refused(bare_broker, message(framed, codec=2))


def test_gzip_wrapper_with_bad_inner_crc_rejected(bare_broker: EmbeddedBroker) -> None:
    inner = message(b"fine") + message(b"broken", crc=0)
    assert refused(bare_broker, gzip_wrapper(inner))
    assert stored(bare_broker, "t", 0) == b""


def test_gzip_inside_gzip_stored(bare_broker: EmbeddedBroker) -> None:
    w = gzip_wrapper(gzip_wrapper(THREE) + message(b"plain"))
    with Conn(bare_broker) as c:
        c.produce("t", 0, w)
        c.barrier()
    assert stored(bare_broker, "t", 0) == w


def test_gzip_garbage_rejected(bare_broker: EmbeddedBroker) -> None:
    assert refused(bare_broker, message(b"\x1f\x8b\x08\x00 not really gzip", codec=1))
    assert refused(bare_broker, message(gzip.compress(THREE)[:-6], codec=1))

# --- MULTIPRODUCE --------------------------------------------------------------------------


def test_multiproduce_stores_every_item(bare_broker: EmbeddedBroker) -> None:
    req = wire.MultiProduceRequest(
        (
            wire.ProduceRequest("t", 0, THREE[:17]),
            wire.ProduceRequest("t", 1, THREE[17:]),
            wire.ProduceRequest("u", 0, THREE),
            wire.ProduceRequest("t", 0, THREE[17:34]),
        )
    )
    with Conn(bare_broker) as c:
        c.request(req)
        c.barrier()
    assert stored(bare_broker, "t", 0) == THREE[:34]
    assert stored(bare_broker, "t", 1) == THREE[17:]
    assert stored(bare_broker, "u", 0) == THREE


def test_multiproduce_bad_item_closes_after_earlier_items(bare_broker: EmbeddedBroker) -> None:
    # 0.7.2 handles the items in order; the bad one throws and closes the connection
    bad = message(b"bad", crc=1)
    req = wire.MultiProduceRequest(
        (
            wire.ProduceRequest("t", 0, THREE[:17]),
            wire.ProduceRequest("t", 1, bad),
            wire.ProduceRequest("u", 0, THREE),
        )
    )
    with Conn(bare_broker) as c:
        c.request(req)
        assert c.closed_by_peer()
    assert stored(bare_broker, "t", 0) == THREE[:17]
    assert stored(bare_broker, "t", 1) == b""
    assert stored(bare_broker, "u", 0) == b""
    assert bare_broker.log_end("u", 0) is None


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
