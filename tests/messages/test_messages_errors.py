"""Every kind of bad input gets its typed error, with the absolute offset of the outer message."""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from _bytes import GZIP, SNAPPY, message
from _kwargs import DecodeOptions

from kafka_pyspark._messages import (
    MAX_MESSAGE_LENGTH,
    MAX_NESTING_DEPTH,
    codec_id,
    decode_message_set,
    encode_message,
    encode_message_set,
    scan_boundaries,
)
from kafka_pyspark.errors import (
    CorruptMessageError,
    DecompressedSizeError,
    DecompressionError,
    InvalidMessageSizeError,
    MessageError,
    SchemaError,
    UnknownCodecError,
    UnknownMagicError,
)

if TYPE_CHECKING:
    from typing import Unpack


BASE = 5000
GOOD = message(b"good one") + message(b"good two")  # 18 + 18 bytes


def raises(
    exc: type[MessageError], data: bytes, offset: int, **kw: Unpack[DecodeOptions]
) -> MessageError:
    with pytest.raises(exc) as info:
        decode_message_set(data, BASE, **kw)
    assert info.value.offset == offset, str(info.value)
    assert f"at offset {offset}" in str(info.value)
    return info.value


# --- outer messages ------------------------------------------------------------------------


def test_crc_mismatch_names_offset_and_both_crcs() -> None:
    bad = bytearray(message(b"payload!"))
    bad[-1] ^= 0x01
    err = raises(CorruptMessageError, GOOD + bytes(bad) + GOOD, BASE + 36)
    stored = zlib.crc32(b"payload!")
    actual = zlib.crc32(b"payload" + bytes([ord("!") ^ 1]))
    assert f"{stored:08x}" in str(err) and f"{actual:08x}" in str(err)


def test_crc_mismatch_in_stored_field_of_magic0() -> None:
    bad = bytearray(message(b"zero", magic=0))
    bad[6] ^= 0x80
    raises(CorruptMessageError, GOOD + bytes(bad), BASE + 36)


def test_crc_mismatch_in_a_long_uniform_run() -> None:
    values = [bytes([i % 256]) * 200 for i in range(500)]
    data = bytearray(encode_message_set(values))
    data[210 * 321 + 50] ^= 0x10
    raises(CorruptMessageError, bytes(data), BASE + 210 * 321)


def test_crc_not_checked_when_disabled() -> None:
    bad = bytearray(GOOD)
    bad[-1] ^= 0x01
    result = decode_message_set(bytes(bad), verify_crc=False)
    assert result.message_count == 2


@pytest.mark.parametrize("length", [-1, -4, -(1 << 31), 0, 1, 4])
def test_length_too_small(length: int) -> None:
    data = GOOD + struct.pack(">i", length) + b"\x01\x00" + b"\x00" * 20
    raises(InvalidMessageSizeError, data, BASE + 36)


def test_length_too_small_at_the_very_end() -> None:
    raises(InvalidMessageSizeError, GOOD + struct.pack(">i", -7), BASE + 36)


def test_length_smaller_than_magic1_header() -> None:
    data = GOOD + struct.pack(">iBBI", 5, 1, 0, 0)[:9]  # LENGTH 5 leaves -1 payload bytes
    raises(InvalidMessageSizeError, data, BASE + 36)


def test_absurd_length() -> None:
    data = GOOD + struct.pack(">i", MAX_MESSAGE_LENGTH + 1) + b"\x01\x00" + b"\x00" * 20
    err = raises(InvalidMessageSizeError, data, BASE + 36)
    assert str(MAX_MESSAGE_LENGTH + 1) in str(err)


@pytest.mark.parametrize("magic", [2, 3, 0x7F, 0x80, 0xFF])
def test_unknown_magic(magic: int) -> None:
    data = GOOD + struct.pack(">iBBI", 8, magic, 0, 0) + b"ab"
    err = raises(UnknownMagicError, data, BASE + 36)
    assert str(magic) in str(err)


@pytest.mark.parametrize("attributes", [3, 7, 0xFF])
def test_unknown_codec(attributes: int) -> None:
    raises(UnknownCodecError, GOOD + message(b"xx", codec=attributes), BASE + 36)


def test_earliest_error_wins() -> None:
    bad_crc = bytearray(message(b"crc"))
    bad_crc[-1] ^= 1
    bad_magic = struct.pack(">iBBI", 8, 9, 0, 0) + b"ab"
    raises(CorruptMessageError, GOOD + bytes(bad_crc) + bad_magic, BASE + 36)
    raises(UnknownMagicError, GOOD + bad_magic + bytes(bad_crc), BASE + 36)
    bad_gzip = message(b"\x1f\x8bnot gzip at all", codec=GZIP)
    raises(DecompressionError, GOOD + bad_gzip + bad_magic, BASE + 36)
    raises(UnknownMagicError, GOOD + bad_magic + bad_gzip, BASE + 36)


def test_stop_at_before_a_bad_message_decodes_the_rest() -> None:
    bad = struct.pack(">iBBI", 8, 9, 0, 0) + b"ab"
    result = decode_message_set(GOOD + bad, BASE, stop_at=BASE + 36)
    assert result.message_count == 2


# --- wrappers ------------------------------------------------------------------------------


def test_wrapper_crc_mismatch() -> None:
    data = bytearray(message(gzip.compress(GOOD), codec=GZIP))
    data[-1] ^= 0x01
    raises(CorruptMessageError, GOOD + bytes(data), BASE + 36)


def test_inner_crc_mismatch_names_wrapper_offset() -> None:
    inner = bytearray(GOOD)
    inner[-1] ^= 0x01
    data = GOOD + message(gzip.compress(bytes(inner)), codec=GZIP)
    err = raises(CorruptMessageError, data, BASE + 36)
    assert "inner" in str(err)


def test_zlib_without_gzip_header() -> None:
    err = raises(DecompressionError, GOOD + message(zlib.compress(GOOD), codec=GZIP), BASE + 36)
    assert "GZIP" in str(err)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x1f",
        gzip.compress(GOOD)[:-5],  # truncated
        gzip.compress(GOOD)[:12] + b"\xff" * 30,  # corrupt deflate
        b"\x1f\x8b\x08\x00" + b"\x00" * 4,  # header only
    ],
)
def test_undecodable_gzip(payload: bytes) -> None:
    raises(DecompressionError, GOOD + message(payload, codec=GZIP), BASE + 36)


def test_gzip_trailing_bytes_are_ignored_like_java() -> None:
    data = message(gzip.compress(GOOD) + b"\x00\x00junk", codec=GZIP)
    assert decode_message_set(data).batch.num_rows == 2


def test_snappy_framing_format_rejected() -> None:
    framed = b"\xff\x06\x00\x00sNaPpY" + b"\x01\x00\x00\x00" + b"abcd"
    err = raises(DecompressionError, GOOD + message(framed, codec=SNAPPY), BASE + 36)
    assert "framing format" in str(err)


JAVA = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # no varint
        b"\xff\xff\xff\xff\xff\xff",  # varint never ends
        b"\x10\x00",  # announces 16 bytes, holds nothing
        b"\x05\x0cabc",  # literal longer than the block
        JAVA + struct.pack(">i", 100) + b"\x05\x10hello",  # block longer than payload
        JAVA + struct.pack(">i", 0),  # empty block
        JAVA + struct.pack(">i", -5) + b"\x00" * 8,  # negative block length
        JAVA + b"\x00\x00",  # truncated block length
        JAVA[:12],  # truncated header
        b"\x82SNAPPY\x00" + struct.pack(">ii", 2, 2),  # needs a newer reader
        JAVA + struct.pack(">i", 7) + b"\x05\x10hel",  # block cut short
    ],
)
def test_undecodable_snappy(payload: bytes) -> None:
    raises(DecompressionError, GOOD + message(payload, codec=SNAPPY), BASE + 36)


def test_inner_garbage_after_last_message() -> None:
    err = raises(CorruptMessageError, GOOD + message(gzip.compress(GOOD + b"\x00\x01"), codec=GZIP),
                 BASE + 36)
    assert "inside a compressed wrapper" in str(err)


def test_inner_partial_message() -> None:
    inner = GOOD + message(b"cut")[:-2]
    raises(CorruptMessageError, GOOD + message(gzip.compress(inner), codec=GZIP), BASE + 36)


@pytest.mark.parametrize("length", [-1, 2, MAX_MESSAGE_LENGTH + 1])
def test_inner_bad_length(length: int) -> None:
    inner = GOOD + struct.pack(">i", length) + b"\x01\x00" + b"\x00" * 10
    raises(InvalidMessageSizeError, GOOD + message(gzip.compress(inner), codec=GZIP), BASE + 36)


def test_inner_unknown_magic_and_codec() -> None:
    inner = GOOD + struct.pack(">iBBI", 8, 5, 0, 0) + b"ab"
    raises(UnknownMagicError, GOOD + message(gzip.compress(inner), codec=GZIP), BASE + 36)
    inner = GOOD + message(b"x", codec=3)
    raises(UnknownCodecError, GOOD + message(gzip.compress(inner), codec=GZIP), BASE + 36)


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_decompressed_size_bound(codec: str) -> None:
    values = [b"v" * 1000] * 10
    data = encode_message_set(values, compression=codec)
    inner_size = len(encode_message_set(values))
    assert decode_message_set(data, max_decompressed_size=inner_size).batch.num_rows == 10
    with pytest.raises(DecompressedSizeError) as info:
        decode_message_set(GOOD + data, BASE, max_decompressed_size=inner_size - 1)
    assert info.value.offset == BASE + 36


def test_gzip_bomb_is_bounded() -> None:
    bomb = gzip.compress(b"\x00" * (16 << 20), compresslevel=9)  # ~16 KB expanding to 16 MiB
    raises(DecompressedSizeError, GOOD + message(bomb, codec=GZIP), BASE + 36,
           max_decompressed_size=1 << 20)


def test_decompressed_size_counts_all_nesting_levels() -> None:
    inner = encode_message_set([b"w" * 3000] * 3, compression="gzip")
    outer = message(gzip.compress(inner + inner), codec=GZIP)
    total = len(inner) * 2 + 2 * len(encode_message_set([b"w" * 3000] * 3))
    assert decode_message_set(outer, max_decompressed_size=total).batch.num_rows == 6
    raises(DecompressedSizeError, outer, BASE, max_decompressed_size=total - 1)


def test_nesting_too_deep() -> None:
    data = message(b"core")
    for _ in range(MAX_NESTING_DEPTH):
        data = message(gzip.compress(data), codec=GZIP)
    assert decode_message_set(data).batch.column("value").to_pylist() == [b"core"]
    err = raises(DecompressionError, GOOD + message(gzip.compress(data), codec=GZIP), BASE + 36)
    assert "nested" in str(err)


# --- scan, arguments and the encoder --------------------------------------------------------


def test_scan_boundaries_errors() -> None:
    with pytest.raises(InvalidMessageSizeError) as info:
        scan_boundaries(GOOD + struct.pack(">i", 2) + b"\x00" * 8, BASE)
    assert info.value.offset == BASE + 36
    with pytest.raises(UnknownMagicError):
        scan_boundaries(GOOD + struct.pack(">iBBI", 8, 4, 0, 0) + b"ab", BASE)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        decode_message_set(GOOD, -1)
    with pytest.raises(ValueError):
        decode_message_set(GOOD, max_decompressed_size=-1)


def test_offsets_past_int64_are_refused_not_wrapped() -> None:
    """The last byte's offset must be an int64 (the kernel adds positions to the base in
    int64: past it, C's signed overflow); the base that just fits decodes."""
    last = (1 << 63) - 1 - len(GOOD)
    assert decode_message_set(GOOD, last).next_offset == (1 << 63) - 1
    assert scan_boundaries(GOOD, last)[1] == (1 << 63) - 1
    for call in (decode_message_set, scan_boundaries):
        with pytest.raises(ValueError, match="within int64"):
            call(GOOD, last + 1)
    assert decode_message_set(b"", (1 << 63) - 1).next_offset == (1 << 63) - 1


def test_encoder_errors() -> None:
    with pytest.raises(UnknownMagicError):
        encode_message(b"x", magic=2)
    with pytest.raises(UnknownMagicError):
        encode_message_set([b"x"], magic=-1)
    with pytest.raises(UnknownCodecError):
        encode_message(b"x", magic=0, codec=1)
    with pytest.raises(UnknownCodecError):
        encode_message_set([b"x"], compression="lz4")
    with pytest.raises(UnknownCodecError):
        encode_message_set([b"x"], compression=3)
    with pytest.raises(UnknownCodecError):
        codec_id(True)
    with pytest.raises(MessageError) as info:
        encode_message_set(pa.array([b"a", None, b"c"]))
    assert "index 1" in str(info.value)
    with pytest.raises(SchemaError):
        encode_message_set(pa.array([1, 2, 3]))
    with pytest.raises(SchemaError):
        encode_message_set([b"ok", 12])  # deliberately not bytes


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_wrapper_larger_than_one_inflate_step(codec: str) -> None:
    values = [bytes([i]) * 100_000 for i in range(30)]  # 3 MB inside one wrapper
    data = encode_message_set(values, compression=codec)
    inner_size = len(encode_message_set(values))
    result = decode_message_set(data, max_decompressed_size=inner_size)
    assert result.batch.column("value").to_pylist() == values
    raises(DecompressedSizeError, GOOD + data, BASE + 36, max_decompressed_size=inner_size - 1)
