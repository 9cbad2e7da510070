"""The fast lane (``messages.flat``) and the kernel parts it runs on: ``take`` (scan and copy in
one pass), the snappy decoder (``snappy_raw``, ``snappy_size``, ``snappy_take``,
``snappy_fetch``). The lane must give exactly what the general path gives (rows, offsets,
errors) and must never decide an error itself; the snappy decoder accepts exactly the blocks
cramjam accepts, with the same bytes out.

Golden snappy blocks are written by hand from the format (``_snappy.c``'s header comment):
a varint of the uncompressed size, then literal and copy elements.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _outcome import outcome

from kafka_pyspark._messages import decode, encode_message, flat, walk
from kafka_pyspark._messages import encode_message_set as encode
from kafka_pyspark._messages.compression import gzip_compress

KERNEL = walk.kernel
pytestmark = pytest.mark.skipif(KERNEL is None, reason="the compiled kernel is not built")
HOSTILE = [-1, -4, -(1 << 31), 0, 1, 4, (1 << 31) - 1, (1 << 30) + 1]
JAVA_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
END, WRAPPER, FULL, BAD_SNAPPY, BAD_CRC = 0, 7, 8, 9, 10


@pytest.fixture
def fast_taken(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Records, per decode call, whether the fast lane produced the result."""
    taken: list[bool] = []
    inner = decode._decode_flat

    def spy(*args: Any) -> Any:
        result = inner(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(decode, "_decode_flat", spy)
    yield taken


def both_paths(data: bytes, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, ...]:
    fast = outcome(data, **kw)
    with monkeypatch.context() as m:
        m.setattr(walk, "kernel", None)
        assert outcome(data, **kw) == fast
    return fast


# --- the lane gives what the general path gives ----------------------------------------------


def test_plain_and_wrapped_sets_take_the_lane(monkeypatch: pytest.MonkeyPatch,
                                              fast_taken: list[bool]) -> None:
    values = [b"", b"a", b"hello", bytes(300), b"x" * 5000]
    plain = b"".join(encode_message(v, magic=m) for v in values for m in (0, 1))
    for data in (plain, plain[:-3], encode(values, compression="snappy"),
                 encode(values, compression="gzip") + encode(values[:2], compression="snappy")):
        result = both_paths(data, monkeypatch)
        assert isinstance(result[0], dict)
    assert fast_taken == [True, True, True, True]
    rows = both_paths(encode(values, compression="snappy") * 2, monkeypatch)[0]
    assert rows["value"] == values * 2
    assert rows["inner_index"] == [0, 1, 2, 3, 4] * 2
    assert rows["offset"][5] == rows["next_offset"][0] == 1000 + len(
        encode(values, compression="snappy"))


def random_set(rnd: random.Random) -> bytes:
    parts = []
    for _ in range(rnd.randrange(0, 12)):
        values = [rnd.randbytes(rnd.choice([0, 3, 40, 400])) for _ in range(rnd.randrange(1, 30))]
        kind = rnd.choice(["none", "none", "gzip", "snappy", "snappy", "nested"])
        if kind == "none":
            parts.append(b"".join(encode_message(v, magic=rnd.choice([0, 1])) for v in values))
        elif kind == "nested":
            inner = encode(values, compression=rnd.choice(["gzip", "snappy"]))
            parts.append(encode_message(zlib.compress(inner)[2:], codec=1))  # not gzip
            parts.append(encode_message(gzip_compress(inner), codec=1))  # a wrapper in a wrapper
        else:
            parts.append(encode(values, compression=kind, magic=rnd.choice([0, 1])))
    return b"".join(parts)


def corrupt(rnd: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rnd.randrange(0, 3) if buf else 0):
        at = rnd.randrange(len(buf))
        action = rnd.randrange(3)
        if action == 0:
            buf[at] ^= 1 << rnd.randrange(8)
        elif action == 1 and at + 4 <= len(buf):
            struct.pack_into(">i", buf, at, rnd.choice([*HOSTILE, 5, 6, 100]))
        else:
            del buf[at:]
    return bytes(buf)


@pytest.mark.parametrize("seed", range(80))
def test_lane_and_general_path_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    data = corrupt(rnd, random_set(rnd))
    kw: dict[str, Any] = {"verify_crc": rnd.random() < 0.8}
    if rnd.random() < 0.3:
        kw["stop_at"] = 1000 + rnd.randrange(len(data) + 1)
    if rnd.random() < 0.2:
        kw["max_decompressed_size"] = rnd.randrange(0, 3000)
    both_paths(data, monkeypatch, **kw)


def test_a_bad_crc_falls_back_to_the_exact_error(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = bytearray(encode_message(b"hello") * 3)  # 15 bytes each
    plain[29] ^= 0xFF  # the second payload's last byte
    wrapped = bytearray(encode([b"abc"] * 3, compression="snappy"))
    wrapped[-1] ^= 0xFF  # the wrapper's payload
    for data, offset in [(plain, 1015), (wrapped, 1000)]:
        error = both_paths(bytes(data), monkeypatch)
        assert error[0].__name__ == "CorruptMessageError"
        assert error[1] == offset


# --- take ------------------------------------------------------------------------------------


def sink(size: int = 64, count: int = 8) -> tuple[Any, Any, Any, Any]:
    return (np.zeros(size, np.uint8), np.zeros(count + 1, np.int32),
            np.zeros(count, np.uint32), np.zeros(count + 1, np.int64))


# LENGTH 8, MAGIC 1, ATTRIBUTES 0, CRC32("hi"), "hi"; then magic 0, "abc"
HI = bytes.fromhex("00000008" "01" "00" "d8932aac") + b"hi"
ABC = bytes.fromhex("00000008" "00" "352441c2") + b"abc"


def test_take_golden() -> None:
    assert KERNEL is not None
    data, offsets, words, starts = sink()
    data_set = HI + ABC
    r = KERNEL.take(data_set, 0, len(data_set), len(data_set), 100, data, 0, offsets, words, 0,
                    starts)
    assert r == (2, 24, END, 0, 5, 2)
    assert bytes(data[:5]) == b"hiabc"
    assert offsets[:3].tolist() == [0, 2, 5]
    assert starts[:3].tolist() == [100, 112, 124]
    assert words[:2].tolist() == [0xD8932AAC ^ zlib.crc32(b"\0\0"),
                                  0x352441C2 ^ zlib.crc32(b"\0\0\0")]
    wrap = bytes.fromhex("00000009" "01" "02" "00000000") + b"zzz"
    r = KERNEL.take(HI + wrap, 0, 25, 25, 0, data, 0, offsets, words, 0, None)
    assert r == (1, 12, WRAPPER, 2, 2, 1)


@pytest.mark.parametrize("length", HOSTILE)
def test_take_hostile_length_is_what_scan_says(length: int) -> None:
    assert KERNEL is not None
    data_set = HI + struct.pack(">i", length) + b"\x01\x00" + b"\0" * 20
    scan = walk.scan(memoryview(data_set), 0, len(data_set), len(data_set))
    data, offsets, words, starts = sink()
    m, at, status, value, dpos, k = KERNEL.take(data_set, 0, len(data_set), len(data_set), 0,
                                                data, 0, offsets, words, 0, starts)
    assert (m, at, status, value) == (len(scan.recs), scan.end, scan.status, scan.value)
    assert (dpos, k) == (2, 1)


def test_take_stops_when_the_sink_is_full() -> None:
    assert KERNEL is not None
    data_set = HI * 3
    for size, count in [(3, 8), (64, 1)]:
        data, offsets, words, starts = sink(size, count)
        r = KERNEL.take(data_set, 0, 36, 36, 0, data, 0, offsets, words, 0, starts)
        assert r[2] == FULL and r[0] == 1


def test_take_rejects_bad_arguments() -> None:
    assert KERNEL is not None
    data, offsets, words, starts = sink()
    for args in [(HI, -1, 12, 12), (HI, 0, 13, 13), (HI, 5, 4, 4)]:
        with pytest.raises(ValueError):
            KERNEL.take(*args, 0, data, 0, offsets, words, 0, starts)
    for dpos, k in [(-1, 0), (65, 0), (0, -1), (0, 9)]:
        with pytest.raises(ValueError):
            KERNEL.take(HI, 0, 12, 12, 0, data, dpos, offsets, words, k, starts)
    with pytest.raises(ValueError):
        KERNEL.take(HI, 0, 12, 12, 0, data, 0, offsets, words, 0, starts[:0])
    for k0, k1 in [(2, 1), (0, 9), (-1, 0)]:
        with pytest.raises(ValueError):
            KERNEL.check_rows(data, offsets, words, k0, k1, zlib.crc32)


# --- the snappy decoder ----------------------------------------------------------------------

GOLDEN_BLOCKS = [
    (b"\x00", b""),  # size 0, nothing else
    (b"\x05\x10hello", b"hello"),  # literal of 5: tag (5 - 1) << 2
    (b"\x09\x08abc\x09\x03", b"abcabcabc"),  # literal "abc", copy 6 from 3 back (1-byte offset)
    (b"\x08\x08abc\x12\x03\x00", b"abcabcab"),  # copy 5 from 3 back, 2-byte offset
    (b"\x07\x04ab\x13\x02\x00\x00\x00", b"abababa"),  # copy 5 from 2 back, 4-byte offset
    (b"\x41\x00a\xfe\x01\x00", b"a" * 65),  # copy 64 from 1 back: a run
    (b"\x46\xf0\x45" + bytes(range(70)), bytes(range(70))),  # literal, length in 1 more byte
    (b"\x80\x01\xf4\x7f\x00" + b"z" * 128, b"z" * 128),  # varint 128; 2-byte literal length
    (b"\x18\x0cwxyz\x3e\x04\x00\x01\x10", b"wxyz" * 6),  # copy 16 from 4, copy 4 from 16
]

BAD_BLOCKS = [
    b"",  # no varint
    b"\x80\x80\x80\x80\x80\x01",  # a varint longer than 5 bytes
    b"\xff\xff\xff\xff\x7f",  # a size past 2^32
    b"\x05\x10hell",  # literal past the input
    b"\x04\x10hello",  # literal past the announced size
    b"\x06\x10hello",  # one byte short of the announced size
    b"\x05\x10hello\x00",  # a tag after the end
    b"\x09\x08abc\x09\x00",  # copy from offset 0
    b"\x09\x08abc\x09\x04",  # copy from before the start
    b"\x09\x08abc\x09",  # copy whose offset is cut off
    b"\x09\x08abc\x0d\x03",  # copy past the announced size
    b"\x08\x08abc\x12\x03",  # 2-byte offset cut off
    b"\x07\x04ab\x13\x02\x00\x00",  # 4-byte offset cut off
    b"\x07\x04ab\x13\xff\xff\xff\xff",  # 4-byte offset far before the start
    b"\x46\xf0",  # literal length byte missing
    b"\x05\xfc\xff\xff\xff\xff",  # a 4-byte literal length of 2^32
]


@pytest.mark.parametrize(("block", "expected"), GOLDEN_BLOCKS)
def test_snappy_golden_blocks(block: bytes, expected: bytes) -> None:
    assert KERNEL is not None
    cramjam = pytest.importorskip("cramjam")
    assert bytes(cramjam.snappy.decompress_raw(block)) == expected  # the vector is right
    out = bytearray(len(expected) + 40)
    assert KERNEL.snappy_raw(block, out) == len(expected)
    assert bytes(out[: len(expected)]) == expected
    with pytest.raises(ValueError):  # no room
        KERNEL.snappy_raw(block, bytearray(len(expected) - 1)) if expected else (
            KERNEL.snappy_raw(b"\x01", bytearray(1)))


@pytest.mark.parametrize("block", BAD_BLOCKS)
def test_snappy_bad_blocks_are_refused(block: bytes) -> None:
    assert KERNEL is not None
    cramjam = pytest.importorskip("cramjam")
    with pytest.raises(Exception):  # noqa: B017 - cramjam's own error classes
        cramjam.snappy.decompress_raw(block)
    with pytest.raises(ValueError):
        KERNEL.snappy_raw(block, bytearray(200))


@pytest.mark.parametrize("seed", range(40))
def test_snappy_random_blocks_agree_with_cramjam(seed: int) -> None:
    assert KERNEL is not None
    cramjam = pytest.importorskip("cramjam")
    rnd = random.Random(seed)
    text = bytes(rnd.choices(b"ab {}:0\x00", k=rnd.randrange(0, 3000))) * rnd.randrange(1, 3)
    block = bytearray(bytes(cramjam.snappy.compress_raw(text)))
    for _ in range(rnd.randrange(0, 3)):
        block[rnd.randrange(len(block))] = rnd.randrange(256)
    try:
        expected: bytes | None = bytes(cramjam.snappy.decompress_raw(bytes(block)))
    except Exception:  # cramjam refuses it
        expected = None
    out = bytearray(1 << 16)
    try:
        got: bytes | None = bytes(out[: KERNEL.snappy_raw(bytes(block), out)])
    except ValueError:
        got = None
    assert got == expected


def java(*blocks: bytes) -> bytes:
    return JAVA_HEADER + b"".join(struct.pack(">i", len(b)) + b for b in blocks)


@pytest.mark.parametrize("payload", [
    JAVA_HEADER + struct.pack(">i", -1) + b"\x00",
    JAVA_HEADER + struct.pack(">i", 0),
    JAVA_HEADER + struct.pack(">i", -4),
    JAVA_HEADER + struct.pack(">i", 2) + b"\x00",  # past the payload
    JAVA_HEADER + struct.pack(">i", (1 << 31) - 1) + b"\x00",
    JAVA_HEADER + struct.pack(">i", -(1 << 31)) + b"\x00",
    JAVA_HEADER + b"\x00\x00",  # a length cut off
    java(b"\x00") + JAVA_HEADER[:12],  # a header cut off
    java(b"\x00") + b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 2),  # reader version 2
    b"\xff\x06\x00\x00sNaPpY",  # the framing format
    b"",
])
def test_snappy_hostile_framing(payload: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    assert KERNEL is not None
    assert KERNEL.snappy_size(payload) == -1
    data, offsets, words, _ = sink()
    assert KERNEL.snappy_take(payload, data, 0, offsets, words, 0)[0] == BAD_SNAPPY
    error = both_paths(encode_message(payload, codec=2), monkeypatch)
    assert error[0].__name__ == "DecompressionError" and error[1] == 1000


def test_snappy_framing_golden() -> None:
    assert KERNEL is not None
    inner = HI + ABC  # 24 bytes: literal of 24
    block = b"\x18\x5c" + inner
    for payload in (java(block), java(b"\x0a\x24" + inner[:10], b"\x0e\x34" + inner[10:]),
                    java(block) + JAVA_HEADER + struct.pack(">i", 1) + b"\x00", block):
        assert KERNEL.snappy_size(payload) == 24
        data, offsets, words, _ = sink()
        assert KERNEL.snappy_take(payload, data, 0, offsets, words, 0) == (END, 0, 5, 2, 2)
        assert bytes(data[:5]) == b"hiabc"


def test_snappy_fetch_guards() -> None:
    assert KERNEL is not None
    wrapper = encode_message(java(b"\x18\x5c" + HI + ABC), codec=2)
    data_set = wrapper * 2
    scan = walk.scan(memoryview(data_set), 0, len(data_set), len(data_set))
    data, offsets, words, _ = sink()
    counts = np.zeros(2, np.int64)
    args = (offsets, words, counts, zlib.crc32, True)
    assert KERNEL.snappy_fetch(data_set, scan.recs, data, *args) == (END, 2, 10, 4)
    assert counts.tolist() == [2, 2] and bytes(data[:10]) == b"hiabc" * 2
    with pytest.raises(ValueError):
        KERNEL.snappy_fetch(data_set, scan.recs, data, offsets, words, counts[:1], zlib.crc32,
                            True)
    with pytest.raises(ValueError, match="engine 2 is not there"):  # libdeflate: _gzip's only
        KERNEL.snappy_fetch(data_set, scan.recs, data, offsets, words, counts,
                            walk.CRC_LIBDEFLATE, True)
    for not_an_engine in (None, True, 0, "crc32"):
        with pytest.raises(TypeError):
            KERNEL.snappy_fetch(data_set, scan.recs, data, offsets, words, counts, not_an_engine,
                                False)
    bad = bytearray(data_set)
    bad[-1] ^= 1  # the second wrapper's payload: its CRC
    assert KERNEL.snappy_fetch(bytes(bad), scan.recs, data, *args)[:2] == (BAD_CRC, 1)
    bad = bytearray(data_set)
    bad[len(wrapper) - 1] ^= 1  # an inner payload of the first wrapper, wrapper CRC fixed
    payload = bytes(bad[10 : len(wrapper)])
    struct.pack_into(">I", bad, 6, zlib.crc32(payload))
    assert KERNEL.snappy_fetch(bytes(bad), scan.recs, data, *args)[0] == BAD_CRC
    recs = scan.recs.copy()
    recs["start"][1] = len(data_set) - 5  # a record pointing past the buffer
    assert KERNEL.snappy_fetch(data_set, recs, data, *args)[:2] == (BAD_SNAPPY, 1)
    assert KERNEL.snappy_total(data_set, recs) == -1
    recs["start"][1] = (1 << 63) - 1  # and one that would overflow
    assert KERNEL.snappy_fetch(data_set, recs, data, *args)[:2] == (BAD_SNAPPY, 1)
    assert KERNEL.snappy_total(data_set, recs) == -1
    assert KERNEL.snappy_total(data_set, scan.recs) == 48
    small = np.zeros(28, np.uint8)  # no room for the second set
    assert KERNEL.snappy_fetch(data_set, scan.recs, small, *args)[:2] == (BAD_SNAPPY, 1)


def test_flat_returns_none_for_what_it_does_not_decide() -> None:
    nested = encode_message(gzip_compress(encode([b"a"], compression="gzip")), codec=1)
    mixed = encode_message(b"a") + encode([b"b"], compression="snappy")
    for data in (nested, mixed, encode_message(b"a")[:-1] + b"\x00"):
        mv = memoryview(data)
        taken = flat.plain(mv, 0, len(mv), True)
        if taken is not None and taken.values is None:
            outer = walk.scan(mv, 0, len(mv), len(mv))
            assert flat.wrapped(mv, outer, True, 1 << 20) is None
        else:
            assert taken is None


def test_gzip_members_and_trailing_bytes(monkeypatch: pytest.MonkeyPatch,
                                         fast_taken: list[bool]) -> None:
    inner = encode_message(b"one") + encode_message(b"two")
    one = gzip_compress(inner)
    two_members = gzip_compress(inner[:15]) + gzip_compress(inner[15:])  # ISIZE: the last only
    # bytes after the member make the ISIZE hint wrong: the general path decodes those sets
    for payload, lane in [(one, True), (one + b"\x00junk", False), (two_members, False)]:
        rows = both_paths(encode_message(payload, codec=1) * 2, monkeypatch)[0]
        assert rows["value"] == [b"one", b"two"] * 2
        assert fast_taken.pop() is lane


def test_snappy_compaction_of_short_payloads(monkeypatch: pytest.MonkeyPatch,
                                             fast_taken: list[bool]) -> None:
    # payloads shorter than the kernel's 64-byte copy steps, moved down over their own
    # headers in place: the bytes copied past a payload must not reach the next header
    values = [bytes([65 + i % 26]) * (1 + i % 70) for i in range(300)]
    rows = both_paths(encode(values, compression="snappy"), monkeypatch)[0]
    assert rows["value"] == values
    assert fast_taken == [True]
