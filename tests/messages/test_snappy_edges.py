"""The edges of the kernel's snappy decoder (``_snappy.c``) and of its in-place take of a
decompressed wrapper: every fast path against the careful one, cramjam and a reference
expansion written here from the format.

The decoder's fast loop runs while 33+ bytes of input and 64+ bytes of output are left and 16+
bytes are written; there an element of up to 32 bytes is two 16-byte moves whatever its length
(the bytes past it are rewritten by the next elements), copies from fewer than 16 bytes back
repeat their pattern 8 bytes at a time, and literals longer than 32 bytes (or whose length
follows the tag) are copied exactly. Blocks are built here element by element from the format
(``_snappy.c``'s header comment): ``lit`` and ``copy`` write the tags, ``expand`` is the
reference decoder (a byte loop), and every block is also checked against cramjam.
"""

from __future__ import annotations

import random
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from kafka_pyspark._messages import encode_message, flat, walk
from kafka_pyspark._messages.crc import isal_crc_address

KERNEL = walk.kernel
pytestmark = pytest.mark.skipif(KERNEL is None, reason="the compiled kernel is not built")
cramjam = pytest.importorskip("cramjam")
JAVA_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
END, BAD_CRC = 0, 10
GUARD = 0xA5

Element = tuple[str, bytes] | tuple[str, int, int]


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def lit(data: bytes) -> bytes:
    """A literal element: the length - 1 in the tag (< 60) or in 1..4 bytes after it."""
    n = len(data) - 1
    if n < 60:
        return bytes([n << 2]) + data
    size = (n.bit_length() + 7) // 8
    return bytes([(59 + size) << 2]) + n.to_bytes(size, "little") + data


def copy(offset: int, length: int, width: int = 0) -> bytes:
    """A copy element: 1-byte offset (4..11 bytes from < 2048 back), else 2 bytes (or 4)."""
    if width == 1 or (width == 0 and 4 <= length <= 11 and offset < 2048):
        return bytes([((offset >> 8) << 5) | ((length - 4) << 2) | 1, offset & 0xFF])
    if width == 4:
        return bytes([((length - 1) << 2) | 3]) + offset.to_bytes(4, "little")
    return bytes([((length - 1) << 2) | 2]) + offset.to_bytes(2, "little")


def block(elements: list[Element]) -> tuple[bytes, bytes]:
    """The raw block of ``elements`` (("lit", data) or ("copy", offset, length)) and what it
    decompresses to, by the reference expansion."""
    body = bytearray()
    out = bytearray()
    for e in elements:
        if len(e) == 2:  # ("lit", data)
            assert isinstance(e[1], bytes)
            body += lit(e[1])
            out += e[1]
        else:
            _, offset, length = e
            body += copy(offset, length)
            for _ in range(length):  # byte by byte: the copy may overlap itself
                out.append(out[-offset])
    return varint(len(out)) + bytes(body), bytes(out)


def decoded(raw: bytes, cap: int, slack: int = 64) -> bytes | None:
    """The kernel's output for ``raw`` given ``cap`` bytes of room, guard bytes after them
    checked untouched; None if refused."""
    assert KERNEL is not None
    buf = bytearray([GUARD]) * (cap + slack)
    try:
        n = KERNEL.snappy_raw(raw, memoryview(buf)[:cap])
    except ValueError:
        n = None
    assert buf[cap:] == bytearray([GUARD]) * slack  # never a byte past the room given
    return None if n is None else bytes(buf[:n])


def check(elements: list[Element]) -> bytes:
    raw, expected = block(elements)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == expected  # the block is valid snappy
    for cap in (len(expected), len(expected) + 7, len(expected) + 100):
        assert decoded(raw, cap) == expected
    if expected:
        assert decoded(raw, len(expected) - 1) is None
    return raw


TEXT = bytes(range(32, 127)) * 4
HEAD = ("lit", TEXT[:40])  # 40 bytes out: past the fast loop's 16
TAIL = ("lit", TEXT[100:200])  # 100 more bytes of input and output: still in the fast loop


@pytest.mark.parametrize("offset", range(1, 40))
def test_overlapping_copies_in_the_fast_loop(offset: int) -> None:
    for length in (4, 5, 7, 8, 9, 11, 12, 15, 16, 17, 31, 32, 33, 47, 63, 64):
        check([HEAD, ("copy", offset, length), TAIL])
        check([HEAD, ("copy", offset, length), ("copy", offset + 3, length), TAIL])


@pytest.mark.parametrize("offset", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33])
def test_overlapping_copies_at_the_ends(offset: int) -> None:
    for length in (4, 8, 9, 16, 17, 32, 33, 64):
        check([("lit", TEXT[:offset]), ("copy", offset, length)])  # the first element copied
        check([HEAD, ("copy", offset, length)])  # a copy ending exactly at the announced size
        check([HEAD, ("copy", offset, length), ("lit", b"z")])


@pytest.mark.parametrize("length", [*range(1, 70), 100, 255, 256, 257, 1000, 70000])
def test_literals_of_every_length(length: int) -> None:
    data = (TEXT * (length // len(TEXT) + 1))[:length]
    check([("lit", data)])  # alone: the literal ends the output
    check([HEAD, ("lit", data)])  # at the very end of the output
    check([HEAD, ("lit", data), TAIL])  # inside the fast loop
    check([HEAD, ("copy", 40, 40), ("lit", data), ("copy", 7, 64), TAIL, TAIL])


def test_copy_lengths_and_widths_in_the_fast_loop() -> None:
    for length in range(1, 65):
        for offset in (16, 17, 20, 31, 32, 33, 40):
            for width in (2, 4):
                raw, expected = block([HEAD, TAIL])
                body = raw[len(varint(len(expected))):]
                out = bytearray(expected)
                for _ in range(length):
                    out.append(out[-offset])
                tail = lit(TEXT[:50])
                raw = varint(len(out) + 50) + body + copy(offset, length, width) + tail
                assert bytes(cramjam.snappy.decompress_raw(raw)) == bytes(out) + TEXT[:50]
                assert decoded(raw, len(out) + 50) == bytes(out) + TEXT[:50]


def test_copies_from_the_start_and_before_it() -> None:
    for written in (1, 15, 16, 17, 31, 32, 33, 40, 64, 100):
        prefix: list[Element] = [("lit", TEXT[:written])]
        check([*prefix, ("copy", written, 20), TAIL])  # from the very first byte
        size = written + 20 + 100
        for offset in (0, written + 1, 2047, 65535):
            bad = varint(size) + lit(TEXT[:written]) + copy(offset, 20) + lit(TEXT[100:200])
            with pytest.raises(Exception):  # noqa: B017 - cramjam's own error classes
                cramjam.snappy.decompress_raw(bad)
            assert decoded(bad, size + 64) is None


def test_truncated_and_overlong_blocks_in_the_fast_loop() -> None:
    raw, expected = block([HEAD, ("copy", 5, 30), ("lit", TEXT[:60]), ("copy", 100, 64), TAIL])
    for cut in range(1, len(raw)):
        assert decoded(raw[:cut], len(expected) + 64) is None
    head = len(varint(len(expected)))
    for size in (len(expected) - 1, len(expected) + 1, len(expected) + 64):
        assert decoded(varint(size) + raw[head:], len(expected) + 128) is None


@pytest.mark.parametrize("seed", range(12))
def test_random_element_streams(seed: int) -> None:
    rnd = random.Random(seed)
    elements: list[Element] = []
    written = 0
    for _ in range(rnd.randrange(1, 120)):
        if written == 0 or rnd.random() < 0.3:
            n = rnd.choice([rnd.randrange(1, 17), rnd.randrange(17, 34), rnd.randrange(34, 300)])
            start = rnd.randrange(len(TEXT) - 1)
            data = (TEXT[start:] + TEXT)[:n]
            elements.append(("lit", data))
            written += n
        else:
            offset = rnd.choice([rnd.randrange(1, 9), rnd.randrange(1, 33),
                                 rnd.randrange(1, written + 1)])
            offset = min(offset, written)
            length = rnd.randrange(1, 65) if offset >= 2048 else rnd.randrange(4, 65)
            elements.append(("copy", offset, length))
            written += length
    check(elements)


# --- a decompressed wrapper taken in place -----------------------------------------------------


def wrapper_payload(values: list[bytes]) -> bytes:
    """A snappy-java payload of the plain messages ``values``: one literal per message."""
    inner = b"".join(encode_message(v) for v in values)
    raw = varint(len(inner)) + b"".join(lit(inner[i:i + 5000]) for i in range(0, len(inner), 5000))
    return JAVA_HEADER + struct.pack(">i", len(raw)) + raw


@pytest.mark.parametrize("sizes", [
    [0, 0, 0, 1, 2, 3, 4, 5],  # payloads shorter than a CRC word
    [1, 30, 31, 32, 33, 64, 511, 512, 513, 1000, 3],  # the 32-byte steps and memmove
    [20] * 40,  # the headers between them: 10 bytes each, more than 32 after 4
    [1] * 12,  # 30, then 40 bytes between: a 32-byte step must not reach the next header
    [0, 0, 1, 1, 2, 3, 40, 33, 1],
    [600, 2, 700, 0, 5000],
])
def test_take_moves_payloads_down_exactly(sizes: list[int]) -> None:
    assert KERNEL is not None
    values = [bytes((i * 7 + j) & 0xFF for j in range(n)) for i, n in enumerate(sizes)]
    payload = wrapper_payload(values)
    total = sum(5 + 4 + 1 + n for n in sizes)  # LENGTH, magic, CRC (magic 1: + attributes)
    for room, slack in [(total, 0), (total, 64), (total + 4, 64), (total + 100, 0)]:
        # slack 0: an array of exactly the room (for a sanitizer build); else guard bytes after
        data = np.full(room + slack, GUARD, np.uint8)
        offsets = np.zeros(len(sizes) + 1, np.int32)
        words = np.zeros(len(sizes), np.uint32)
        status, _, dpos, k, m = KERNEL.snappy_take(payload, data[:room], 0, offsets, words, 0)
        assert (status, dpos, k, m) == (END, sum(sizes), len(sizes), len(sizes))
        assert bytes(data[:dpos]) == b"".join(values)
        assert (data[room:] == GUARD).all()
        assert offsets.tolist() == np.cumsum([0, *sizes]).tolist()
        assert words.tolist() == [zlib.crc32(v) ^ KERNEL.zeros_crc(len(v)) for v in values]


# --- the lane's per-fetch parts: CRC engine, row columns, the wrapper-first probe ---------------

# LENGTH 8, MAGIC 1, ATTRIBUTES 0, CRC32("hi"), "hi"; then magic 0, "abc" (hand-written)
HI = bytes.fromhex("00000008" "01" "00" "d8932aac") + b"hi"
ABC = bytes.fromhex("00000008" "00" "352441c2") + b"abc"


def test_snappy_fetch_checks_crcs_by_isal_directly() -> None:
    assert KERNEL is not None
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert KERNEL.crc_engine_at(isal_crc_address(isal_zlib.__file__)) is True
    assert flat._SNAPPY_CRC == walk.CRC_ISAL  # the lane calls ISA-L itself
    inner = HI + ABC
    wrapper = encode_message(JAVA_HEADER + struct.pack(">i", 26) + b"\x18\x5c" + inner, codec=2)
    data_set = wrapper * 3
    scan = walk.scan(memoryview(data_set), 0, len(data_set), len(data_set))
    for engine in (walk.CRC_ISAL, zlib.crc32):
        data = np.zeros(64, np.uint8)
        offsets, words = np.zeros(8, np.int32), np.zeros(8, np.uint32)
        counts = np.zeros(3, np.int64)
        assert KERNEL.snappy_fetch(data_set, scan.recs, data, offsets, words, counts, engine,
                                   True) == (END, 3, 15, 6)
        assert bytes(data[:15]) == b"hiabc" * 3 and counts.tolist() == [2, 2, 2]
        bad = bytearray(data_set)
        bad[len(wrapper) * 2 - 1] ^= 0x40  # the second wrapper's last inner payload byte
        assert KERNEL.snappy_fetch(bytes(bad), scan.recs, data, offsets, words, counts, engine,
                                   True)[:2] == (BAD_CRC, 1)  # its wrapper CRC
        recs = scan.recs.copy()
        recs["crc"][1] = zlib.crc32(bad[len(wrapper) + 10 : len(wrapper) * 2])
        assert KERNEL.snappy_fetch(bytes(bad), recs, data, offsets, words, counts, engine,
                                   True)[:2] == (BAD_CRC, 2)  # the rows' CRCs, at the end


def test_crc_engine_answers_for_the_object_it_is_given() -> None:
    assert KERNEL is not None
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert KERNEL.crc_engine_at(isal_crc_address(isal_zlib.__file__)) is True
    # loaded but without the symbol (the kernel itself), or not loaded: no engine there, even
    # after one was found (snappy_fetch keeps the one it has)
    assert isal_crc_address(KERNEL.__file__) == 0
    assert isal_crc_address(isal_zlib.__file__ + ".not-loaded") == 0
    assert KERNEL.crc_engine_at(0) is False
    assert flat._SNAPPY_CRC == walk.CRC_ISAL


def test_wrapped_rows_golden_and_guards() -> None:
    assert KERNEL is not None
    wrapper = encode_message(JAVA_HEADER + struct.pack(">i", 26) + b"\x18\x5c" + HI + ABC,
                             codec=2)  # 56 bytes: LENGTH 52
    data_set = wrapper * 3
    recs = walk.scan(memoryview(data_set), 0, len(data_set), len(data_set)).recs
    offsets, nexts = np.zeros(5, np.int64), np.zeros(5, np.int64)
    inner = np.zeros(5, np.int32)
    counts = np.array([2, 0, 3], np.int64)
    assert KERNEL.wrapped_rows(recs, counts, 1000, offsets, nexts, inner) == 5
    assert offsets.tolist() == [1000, 1000, 1112, 1112, 1112]
    assert nexts.tolist() == [1056, 1056, 1168, 1168, 1168]
    assert inner.tolist() == [0, 1, 0, 1, 2]
    for bad in ([2, 0, 4], [2, -1, 3], [6, 0, 0]):  # past the outputs, negative
        with pytest.raises(ValueError):
            KERNEL.wrapped_rows(recs, np.array(bad, np.int64), 0, offsets, nexts, inner)
    with pytest.raises(ValueError):  # counts shorter than the records
        KERNEL.wrapped_rows(recs, counts[:2], 0, offsets, nexts, inner)
    with pytest.raises(ValueError):  # one output shorter
        KERNEL.wrapped_rows(recs, counts, 0, offsets, nexts, inner[:4])


def test_sets_starting_with_a_wrapper_cut_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KERNEL is not None
    from kafka_pyspark._messages import decode_message_set, encode_message_set

    data_set = encode_message_set([b"x" * 30, b"y"], compression="snappy") + encode_message(b"z")
    for cut in range(len(data_set) + 1):
        part = data_set[:cut]
        got = decode_message_set(part, 7)
        with monkeypatch.context() as m:
            m.setattr(walk, "kernel", None)
            want = decode_message_set(part, 7)
        assert got.batch.to_pydict() == want.batch.to_pydict()
        assert (got.next_offset, got.partial_size) == (want.next_offset, want.partial_size)


def fetch(data_set: bytes, engine: object) -> tuple[Any, ...]:
    assert KERNEL is not None
    recs = walk.scan(memoryview(data_set), 0, len(data_set), len(data_set)).recs
    data = np.zeros(len(data_set) * 4 + 64, np.uint8)
    offsets, words = np.zeros(64, np.int32), np.zeros(64, np.uint32)
    counts = np.zeros(len(recs), np.int64)
    status, i, dpos, k = KERNEL.snappy_fetch(data_set, recs, data, offsets, words, counts,
                                             engine, True)
    return status, i, bytes(data[:dpos]), offsets[: k + 1].tolist(), counts.tolist()


def java_wrapper(inner: bytes) -> bytes:
    raw = varint(len(inner)) + lit(inner)
    return encode_message(JAVA_HEADER + struct.pack(">i", len(raw)) + raw, codec=2)


# plain messages of magic 0 and 1 (9- and 10-byte headers), empty and 1-byte payloads
INNER = [encode_message(b"", magic=0), encode_message(b"a"), encode_message(b"bc", magic=0),
         encode_message(b""), encode_message(b"defgh" * 9), encode_message(b"i", magic=0)]


@pytest.mark.parametrize("engine", [walk.CRC_ISAL, zlib.crc32])
def test_rows_crcs_checked_on_the_decompressed_set(engine: object) -> None:
    if engine == walk.CRC_ISAL:
        pytest.importorskip("isal")
        assert flat._SNAPPY_CRC == walk.CRC_ISAL
    values = [b"", b"a", b"bc", b"", b"defgh" * 9, b"i"]
    data_set = java_wrapper(b"".join(INNER)) + java_wrapper(INNER[4]) + java_wrapper(INNER[0])
    status, i, out, ends, counts = fetch(data_set, engine)
    assert (status, i, counts) == (END, 3, [6, 1, 1])
    assert out == b"".join(values) + values[4]
    assert ends == [0, 0, 1, 3, 3, 48, 49, 94, 94]
    for j, message in enumerate(INNER):  # each inner CRC wrong in turn: the set is refused
        bad = bytearray(message)
        bad[-len(values[j]) - 1] ^= 0x01  # the CRC's last byte
        inner = b"".join(INNER[:j]) + bytes(bad) + b"".join(INNER[j + 1:])
        assert fetch(java_wrapper(inner), engine)[:2] == (BAD_CRC, 0)
        if values[j]:  # or its payload
            bad = bytearray(message)
            bad[-1] ^= 0x80
            inner = b"".join(INNER[:j]) + bytes(bad) + b"".join(INNER[j + 1:])
            assert fetch(java_wrapper(inner), engine)[:2] == (BAD_CRC, 0)


@pytest.mark.parametrize("engine", [walk.CRC_ISAL, zlib.crc32])
def test_one_message_wrappers_are_checked_too(engine: object) -> None:
    if engine is None:
        pytest.importorskip("isal")
    for message, value in ((INNER[1], b"a"), (INNER[4], b"defgh" * 9), (INNER[2], b"bc")):
        assert fetch(java_wrapper(message), engine)[:3] == (END, 1, value)
        bad = bytearray(message)
        bad[-1] ^= 0x10
        assert fetch(java_wrapper(bytes(bad)), engine)[:2] == (BAD_CRC, 0)
        assert fetch(java_wrapper(message) + java_wrapper(bytes(bad)), engine)[:2] == (BAD_CRC, 1)
