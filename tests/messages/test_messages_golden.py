"""Golden byte vectors for the message-set codec, written by hand from docs/dev/PROTOCOL.md
"Messages".

Every vector is spelled field by field; CRCs come from a bitwise CRC-32 written here
(spot-checked against hard-coded values), compressed payloads from the standard library
(``gzip``) or hand-made raw snappy literal blocks, so nothing below depends on the encoder
under test.

    message = int32 LENGTH | int8 MAGIC | [int8 ATTRIBUTES if MAGIC 1] | uint32 CRC32(payload)
              | payload
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import TYPE_CHECKING

import cramjam
import numpy as np
import pyarrow as pa
import pytest
from _kwargs import DecodeOptions

from kafka_pyspark._messages import (
    CODEC_NAMES,
    MESSAGE_SCHEMA,
    codec_id,
    decode_message_set,
    encode_message,
    encode_message_set,
    scan_boundaries,
)

if TYPE_CHECKING:
    from typing import Unpack


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def crc32_bitwise(data: bytes) -> int:
    """CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320), one bit at a time."""
    value = 0xFFFFFFFF
    for byte in data:
        value ^= byte
        for _ in range(8):
            value = (value >> 1) ^ (0xEDB88320 if value & 1 else 0)
    return value ^ 0xFFFFFFFF


def crc(payload: bytes) -> bytes:
    return crc32_bitwise(payload).to_bytes(4, "big")


def be32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def msg(payload: bytes, attributes: int = 0) -> bytes:
    """A magic-1 message, field by field."""
    return be32(1 + 1 + 4 + len(payload)) + bytes([1, attributes]) + crc(payload) + payload


def snappy_literal_block(data: bytes) -> bytes:
    """A raw snappy block that stores ``data`` as one literal (no compression), by hand:
    varint uncompressed length, then tag (len-1)<<2 for len <= 60, or 0xf0 + 1 length byte."""
    n = len(data)
    varint = bytearray()
    v = n
    while True:
        byte = v & 0x7F
        v >>= 7
        varint.append(byte | (0x80 if v else 0))
        if not v:
            break
    if n <= 60:
        tag = bytes([(n - 1) << 2])
    else:
        assert n <= 256
        tag = bytes([60 << 2, n - 1])
    return bytes(varint) + tag + data


SNAPPY_JAVA_HEADER = h("82 53 4e 41 50 50 59 00  00000001  00000001")  # magic, version, compat

# magic 0: LENGTH 10 | MAGIC 0 | CRC32("hello") | "hello"
M0_HELLO = h("0000000a 00 3610a686") + b"hello"
# magic 1, no compression: LENGTH 11 | MAGIC 1 | ATTRIBUTES 0 | CRC32("kafka") | "kafka"
M1_KAFKA = h("0000000b 01 00") + crc(b"kafka") + b"kafka"


def rows(
    data: bytes, base: int = 0, **kw: Unpack[DecodeOptions]
) -> list[tuple[int, int, int, str, bytes]]:
    result = decode_message_set(data, base, **kw)
    d = result.batch.to_pydict()
    return list(
        zip(d["offset"], d["next_offset"], d["inner_index"], d["compression"], d["value"],
            strict=True)
    )


def test_crc_spot_checks() -> None:
    assert crc(b"hello") == h("3610a686")
    assert crc(b"") == h("00000000")
    assert crc(b"123456789") == h("cbf43926")  # the CRC-32 check value
    assert crc(b"kafka") == zlib.crc32(b"kafka").to_bytes(4, "big")


def test_magic0_message() -> None:
    assert rows(M0_HELLO, 100) == [(100, 114, 0, "none", b"hello")]


def test_magic1_message() -> None:
    assert rows(M1_KAFKA, 7) == [(7, 22, 0, "none", b"kafka")]


def test_mixed_magic_set_and_result_fields() -> None:
    data = M0_HELLO + M1_KAFKA + M0_HELLO
    result = decode_message_set(data, 1000)
    assert result.batch.schema == MESSAGE_SCHEMA
    assert [f.type for f in result.batch.schema] == [
        pa.int64(), pa.int64(), pa.int32(), pa.string(), pa.binary()
    ]
    assert rows(data, 1000) == [
        (1000, 1014, 0, "none", b"hello"),
        (1014, 1029, 0, "none", b"kafka"),
        (1029, 1043, 0, "none", b"hello"),
    ]
    assert result.next_offset == 1043
    assert result.bytes_consumed == 43
    assert result.message_count == 3
    assert result.partial_size is None


def test_empty_payloads() -> None:
    data = h("00000005 00 00000000") + h("00000006 01 00 00000000")
    assert rows(data) == [(0, 9, 0, "none", b""), (9, 19, 0, "none", b"")]


def test_attribute_bits_above_codec_mask_are_ignored() -> None:
    # 0.7.2 takes ATTRIBUTES & 0x03 as the codec; 0x04 is codec 0
    data = h("0000000b 01 04") + crc(b"kafka") + b"kafka"
    assert rows(data) == [(0, 15, 0, "none", b"kafka")]


INNER = msg(b"a1") + msg(b"b22") + msg(b"")


def wrapper(payload: bytes, codec: int) -> bytes:
    return be32(6 + len(payload)) + bytes([1, codec]) + crc(payload) + payload


@pytest.mark.parametrize("mtime", [0, 1234567890])
def test_gzip_wrapper(mtime: int) -> None:
    gz = gzip.compress(INNER, mtime=mtime)
    assert gz[:3] == h("1f8b08")
    data = wrapper(gz, 1)
    end = 50 + len(data)
    assert rows(data, 50) == [
        (50, end, 0, "gzip", b"a1"),
        (50, end, 1, "gzip", b"b22"),
        (50, end, 2, "gzip", b""),
    ]
    result = decode_message_set(data, 50)
    assert (result.message_count, result.next_offset) == (1, end)


def test_gzip_multi_member() -> None:
    gz = gzip.compress(msg(b"a1"), mtime=0) + gzip.compress(msg(b"b22") + msg(b""), mtime=0)
    assert [r[4] for r in rows(wrapper(gz, 1))] == [b"a1", b"b22", b""]


def test_snappy_java_framed_wrapper() -> None:
    block = snappy_literal_block(INNER)
    payload = SNAPPY_JAVA_HEADER + be32(len(block)) + block
    data = wrapper(payload, 2)
    end = len(data)
    assert rows(data) == [
        (0, end, 0, "snappy", b"a1"),
        (0, end, 1, "snappy", b"b22"),
        (0, end, 2, "snappy", b""),
    ]


def test_snappy_java_several_blocks_and_repeated_header() -> None:
    first, second = msg(b"a1"), msg(b"b22") + msg(b"")
    b1, b2 = snappy_literal_block(first), snappy_literal_block(second)
    payload = SNAPPY_JAVA_HEADER + be32(len(b1)) + b1 + SNAPPY_JAVA_HEADER + be32(len(b2)) + b2
    assert [r[4] for r in rows(wrapper(payload, 2))] == [b"a1", b"b22", b""]


def test_snappy_real_compressed_block() -> None:
    inner = b"".join(msg(b"x" * 100 + bytes([i])) for i in range(20))
    block = bytes(cramjam.snappy.compress_raw(inner))
    assert len(block) < len(inner)
    payload = SNAPPY_JAVA_HEADER + be32(len(block)) + block
    assert [r[4] for r in rows(wrapper(payload, 2))] == [b"x" * 100 + bytes([i]) for i in range(20)]


def test_raw_snappy_wrapper() -> None:
    # snappy-java falls back to one raw block when the stream header is absent
    data = wrapper(snappy_literal_block(INNER), 2)
    assert [r[2:] for r in rows(data)] == [
        (0, "snappy", b"a1"), (1, "snappy", b"b22"), (2, "snappy", b"")
    ]


def test_gzip_inside_gzip() -> None:
    inner_wrapper = wrapper(gzip.compress(msg(b"a1") + msg(b"b22"), mtime=0), 1)
    outer_payload = gzip.compress(inner_wrapper + msg(b"c333"), mtime=0)
    data = M1_KAFKA + wrapper(outer_payload, 1) + M0_HELLO
    w_end = 15 + 6 + 4 + len(outer_payload)
    assert rows(data, 10) == [
        (10, 25, 0, "none", b"kafka"),
        (25, 10 + w_end, 0, "gzip", b"a1"),
        (25, 10 + w_end, 1, "gzip", b"b22"),
        (25, 10 + w_end, 2, "gzip", b"c333"),
        (10 + w_end, 10 + w_end + 14, 0, "none", b"hello"),
    ]


def test_snappy_inside_gzip_keeps_outer_codec_name() -> None:
    inner_wrapper = wrapper(snappy_literal_block(msg(b"a1")), 2)
    data = wrapper(gzip.compress(msg(b"z") + inner_wrapper, mtime=0), 1)
    assert [r[2:] for r in rows(data)] == [(0, "gzip", b"z"), (1, "gzip", b"a1")]


def test_empty_inner_set() -> None:
    data = wrapper(gzip.compress(b"", mtime=0), 1) + M1_KAFKA
    result = decode_message_set(data)
    assert result.message_count == 2
    assert result.batch.column("value").to_pylist() == [b"kafka"]


def test_magic0_inner_messages() -> None:
    gz = gzip.compress(M0_HELLO + M0_HELLO, mtime=0)
    assert [r[2:] for r in rows(wrapper(gz, 1))] == [(0, "gzip", b"hello"), (1, "gzip", b"hello")]


# --- partial tails -------------------------------------------------------------------------


def test_partial_tail_with_readable_length() -> None:
    result = decode_message_set(M1_KAFKA + M0_HELLO[:7], 100)
    assert result.batch.column("value").to_pylist() == [b"kafka"]
    assert (result.next_offset, result.bytes_consumed, result.partial_size) == (115, 15, 14)


def test_partial_tail_without_readable_length() -> None:
    result = decode_message_set(M1_KAFKA + M0_HELLO[:3], 100)
    assert (result.next_offset, result.message_count, result.partial_size) == (115, 1, None)


def test_first_message_larger_than_buffer() -> None:
    result = decode_message_set(M0_HELLO[:8], 40)
    assert result.batch.num_rows == 0
    assert (result.next_offset, result.bytes_consumed, result.partial_size) == (40, 0, 14)
    assert result.partial_size is not None and result.partial_size > 8


def test_empty_buffer() -> None:
    result = decode_message_set(b"", 5)
    assert result.batch.schema == MESSAGE_SCHEMA
    assert (result.batch.num_rows, result.next_offset, result.partial_size) == (0, 5, None)


def test_stop_at() -> None:
    data = M0_HELLO + M1_KAFKA + M0_HELLO
    assert [r[0] for r in rows(data, 100, stop_at=114)] == [100]
    assert [r[0] for r in rows(data, 100, stop_at=115)] == [100, 114]  # starts before: whole
    assert rows(data, 100, stop_at=100) == []
    assert rows(data, 100, stop_at=50) == []
    result = decode_message_set(data, 100, stop_at=114)
    assert (result.next_offset, result.message_count, result.partial_size) == (114, 1, None)
    # garbage at or after stop_at is not looked at
    assert rows(M0_HELLO + b"\xff" * 20, 0, stop_at=14) == [(0, 14, 0, "none", b"hello")]


def test_scan_boundaries() -> None:
    data = M0_HELLO + M1_KAFKA + wrapper(gzip.compress(INNER, mtime=0), 1) + M0_HELLO[:5]
    starts, end = scan_boundaries(data, 1000)
    assert starts.dtype == np.int64
    assert starts.tolist() == [1000, 1014, 1029]
    assert end == 1000 + len(data) - 5


# --- encoder against golden bytes ----------------------------------------------------------


def java_gzip(data: bytes) -> bytes:
    """What Java 17's GZIPOutputStream writes: fixed header (mtime 0, OS 255), raw deflate at
    the default level 6, CRC32 and ISIZE little-endian."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return h("1f8b 08 00 00000000 00 ff") + body + struct.pack("<II", zlib.crc32(data), len(data))


def test_encode_message_golden() -> None:
    assert encode_message(b"hello", magic=0) == M0_HELLO
    assert encode_message(b"kafka") == M1_KAFKA
    assert encode_message(b"", magic=1) == h("00000006 01 00 00000000")
    assert encode_message(b"xy", codec=2) == h("00000008 01 02") + crc(b"xy") + b"xy"


def test_encode_uncompressed_set_golden() -> None:
    assert encode_message_set([b"hello", b"hello"], magic=0) == M0_HELLO * 2
    assert encode_message_set([b"kafka", "kafka"]) == M1_KAFKA * 2


def test_encode_gzip_golden() -> None:
    inner = msg(b"a1") + msg(b"b22") + msg(b"")
    expected = wrapper(java_gzip(inner), 1)
    assert encode_message_set([b"a1", b"b22", b""], compression="gzip") == expected
    assert encode_message_set([b"a1", b"b22", b""], compression=1) == expected
    # the prefix 0.7.2's producer writes (docs/dev/PROTOCOL.md "Measured: compression"):
    # LENGTH | 01 01 | CRC | gzip header 1f8b 08 00 00000000 00 ff (flags 0, mtime 0, xfl 0,
    # OS 255 as Java 17 writes it). The measurement record spells it "1f8b0800000000000000ff":
    # one 00 more than a 10-byte gzip header has room for (with OS 0 the first deflate byte
    # would be ff, an invalid block type).
    assert expected[4:6] == h("01 01")
    assert expected[10:20] == h("1f8b 08 00 00000000 00 ff")


def test_encode_snappy_layout() -> None:
    inner = msg(b"a1") + msg(b"b22")
    data = encode_message_set([b"a1", b"b22"], compression="snappy")
    length, magic, attributes, stored = struct.unpack_from(">iBBI", data)
    payload = data[10:]
    assert (length, magic, attributes) == (6 + len(payload), 1, 2)
    assert stored == zlib.crc32(payload)
    assert payload[:16] == SNAPPY_JAVA_HEADER
    (block_len,) = struct.unpack_from(">i", payload, 16)
    assert 20 + block_len == len(payload)
    assert bytes(cramjam.snappy.decompress_raw(payload[20:])) == inner


def test_encode_snappy_blocks_of_32k_input() -> None:
    values = [bytes([i % 251]) * 1000 for i in range(100)]  # ~100 KB of messages
    inner = encode_message_set(values)
    payload = encode_message_set(values, compression="snappy")[10:]
    pos, chunks = 16, []
    while pos < len(payload):
        (n,) = struct.unpack_from(">i", payload, pos)
        chunks.append(bytes(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(c) for c in chunks[:-1]] == [32768] * (len(chunks) - 1)
    assert b"".join(chunks) == inner
    assert len(chunks) == -(-len(inner) // 32768)


def test_encode_compressed_wrapper_always_magic1_inner_magic0() -> None:
    data = encode_message_set([b"hello", b"hello"], compression="gzip", magic=0)
    assert data[4:6] == h("01 01")
    assert gzip.decompress(data[10:]) == M0_HELLO * 2


def test_codec_helpers() -> None:
    assert dict(CODEC_NAMES) == {0: "none", 1: "gzip", 2: "snappy"}
    assert [codec_id(x) for x in ("none", "GZIP", " snappy ", 0, 1, 2, "0", "1", "2")] == [
        0, 1, 2, 0, 1, 2, 0, 1, 2
    ]
