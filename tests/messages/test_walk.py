"""The per-message walk (``messages.walk``): the compiled kernel and its pure-Python twin find
exactly the same records, statuses and values on hand-written vectors, hostile lengths and
random (corrupt) sets; the kernel never reads outside a buffer and never trusts a length.

Golden bytes are written from docs/dev/PROTOCOL.md "Message layout (magic 0 and 1)": ``int32 LENGTH
| int8 MAGIC | [int8 ATTRIBUTES] | uint32 CRC32 | PAYLOAD``; CRCs are stdlib ``zlib.crc32`` of the
payload.
"""

from __future__ import annotations

import random
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from _bytes import message

from kafka_pyspark._messages import walk

KERNEL = walk.kernel
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="the compiled kernel is not built")
ENGINES = ["python", pytest.param("kernel", marks=needs_kernel)]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "python":
        monkeypatch.setattr(walk, "kernel", None)
    yield request.param


def rows(scan: walk.Scan) -> list[tuple[int, int, int, int, int]]:
    r = scan.recs
    return list(zip(r["start"].tolist(), r["length"].tolist(), r["crc"].tolist(),
                    r["magic"].tolist(), r["codec"].tolist(), strict=True))


def outcome(data: bytes, stop: int | None = None) -> tuple[Any, ...]:
    s = walk.scan(memoryview(data), 0, len(data), len(data) if stop is None else stop)
    return rows(s), s.end, s.status, s.value, s.leaves, s.leaf_bytes


# --- golden vectors ------------------------------------------------------------------------

# magic 1, no compression, payload "hi": LENGTH 8, MAGIC 1, ATTRIBUTES 0, CRC32("hi")
HI = bytes.fromhex("00000008" "01" "00" "d8932aac") + b"hi"
# magic 0, payload "abc": LENGTH 8, MAGIC 0, CRC32("abc")
ABC = bytes.fromhex("00000008" "00" "352441c2") + b"abc"
# magic 1, gzip attributes (a wrapper; its payload is not looked into by the walk)
WRAP = bytes.fromhex("00000009" "01" "01" "00000000") + b"zzz"
EMPTY_V0 = bytes.fromhex("00000005" "00" "00000000")  # the smallest message: 9 bytes


def test_golden_bytes_match_zlib() -> None:
    assert message(b"hi") == HI and message(b"abc", magic=0) == ABC


def test_golden_walk(engine: str) -> None:
    data = HI + ABC + WRAP + EMPTY_V0
    assert outcome(data) == (
        [(0, 8, 0xD8932AAC, 1, 0), (12, 8, 0x352441C2, 0, 0), (24, 9, 0, 1, 1),
         (37, 5, 0, 0, 0)],
        46, walk.END, 0, 3, 2 + 3 + 0,
    )
    payloads, bad = walk.gather([walk.Piece(walk.scan(memoryview(data), 0, 46, 46), 0, 4)], True)
    assert payloads.to_pylist() == [b"hi", b"abc", b""] and bad is None


def test_stop_and_partial_tail(engine: str) -> None:
    data = HI + ABC + HI
    assert outcome(data, stop=12)[:3] == ([(0, 8, 0xD8932AAC, 1, 0)], 12, walk.END)
    assert outcome(data, stop=13)[1:3] == (24, walk.END)  # a message starting before stop
    assert outcome(data[:-1])[1:4] == (24, walk.PARTIAL, 8)
    assert outcome(data[:26])[1:3] == (24, walk.SHORT)
    assert outcome(b"") == ([], 0, walk.END, 0, 0, 0)


# --- hostile lengths -----------------------------------------------------------------------

HOSTILE = [-1, -4, -(1 << 31), 0, 1, 4, (1 << 31) - 1, (1 << 30) + 1]


@pytest.mark.parametrize("length", HOSTILE)
def test_hostile_length(engine: str, length: int) -> None:
    data = HI + struct.pack(">i", length) + b"\x01\x00" + b"\x00" * 30
    assert outcome(data)[1:4] == (12, walk.BAD_LENGTH, length)


@pytest.mark.parametrize("length", [5 + 1, 1 << 20, 1 << 30])
def test_length_past_the_buffer_is_partial(engine: str, length: int) -> None:
    data = HI + struct.pack(">i", length) + b"\x01\x00\x00"
    assert outcome(data)[1:4] == (12, walk.PARTIAL, length)


def test_magic1_shorter_than_its_header(engine: str) -> None:
    assert outcome(HI + struct.pack(">iB", 5, 1) + b"\x00" * 4)[1:4] == (12, walk.SHORT_V1, 5)


@pytest.mark.parametrize("magic", [2, 0x7F, 0xFF])
def test_bad_magic(engine: str, magic: int) -> None:
    assert outcome(HI + struct.pack(">iBBI", 8, magic, 0, 0) + b"ab")[1:4] == (
        12, walk.BAD_MAGIC, magic)


@pytest.mark.parametrize("attributes", [3, 7, 0xFF])
def test_bad_codec(engine: str, attributes: int) -> None:
    assert outcome(HI + message(b"xy", codec=attributes))[1:4] == (12, walk.BAD_CODEC, attributes)


# --- the kernel's own guards ---------------------------------------------------------------


@needs_kernel
def test_kernel_rejects_bad_ranges_and_records() -> None:
    assert KERNEL is not None
    data = HI + ABC
    recs = np.zeros(4, dtype=walk.RECORD)
    with pytest.raises(ValueError):
        KERNEL.scan(data, 0, len(data) + 1, len(data), recs)
    with pytest.raises(ValueError):
        KERNEL.scan(data, -1, len(data), len(data), recs)
    with pytest.raises(ValueError):  # more messages than records
        KERNEL.scan(data, 0, len(data), len(data), recs[:1])
    out = np.zeros(64, dtype=np.uint8)
    offsets = np.zeros(4, dtype=np.int32)
    words = np.zeros(4, dtype=np.uint32)
    for start, length, magic in [(len(data) - 5, 8, 1), (-3, 8, 1), (0, 2, 1), (0, 8, 7),
                                 (0, (1 << 31) - 1, 1)]:
        recs[0] = (start, length, 0, magic, 0, b"\0" * 6)
        with pytest.raises(ValueError):
            KERNEL.gather(data, recs, 0, 1, out, 0, offsets, words, 0)
    recs[0] = (0, 8, 0, 1, 0, b"\0" * 6)
    with pytest.raises(ValueError):  # the output is too small
        KERNEL.gather(data, recs, 0, 1, out[:1], 0, offsets, words, 0)
    with pytest.raises(ValueError):
        KERNEL.gather(data, recs, 0, 5, out, 0, offsets, words, 0)
    offsets[1] = 61
    with pytest.raises(ValueError):  # a CRC word past the end of the data
        KERNEL.check_rows(out, offsets, words, 0, 1, zlib.crc32)
    offsets[1:3] = 8, 4
    with pytest.raises(ValueError):  # ends out of order
        KERNEL.check_rows(out, offsets, words, 0, 2, zlib.crc32)
    offsets[0] = -1
    with pytest.raises(ValueError):  # a start before the data
        KERNEL.check_rows(out, offsets, words, 0, 1, zlib.crc32)


@needs_kernel
def test_kernel_zero_runs_crc() -> None:
    assert KERNEL is not None
    for n in (0, 1, 4, 255, 65535, 65536, 100_000, 3 << 20):
        assert KERNEL.zeros_crc(n) == zlib.crc32(bytes(n))


# --- random and corrupt sets: the two engines agree ----------------------------------------


def random_set(rnd: random.Random) -> bytes:
    parts = []
    for _ in range(rnd.randrange(0, 400)):
        size = rnd.choice([rnd.randrange(0, 8), rnd.randrange(0, 400)])
        payload = bytes(rnd.choices(b"abc {}:,0\x00\x01", k=size))
        if rnd.random() < 0.1:
            parts.append(message(payload, magic=0))
        else:
            parts.append(message(payload, codec=rnd.choice([0, 0, 0, 1, 2])))
    return b"".join(parts)


def corrupt(rnd: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    if not buf:
        return data
    for _ in range(rnd.randrange(0, 4)):
        at = rnd.randrange(len(buf))
        action = rnd.randrange(4)
        if action == 0:
            buf[at] ^= 1 << rnd.randrange(8)
        elif action == 1 and at + 4 <= len(buf):
            struct.pack_into(">i", buf, at, rnd.choice([*HOSTILE, 5, 6, 7, 100]))
        elif action == 2:
            del buf[at:]
        else:
            buf[at] = rnd.choice([0, 1, 2, 3, 0xFF])
    return bytes(buf)


@needs_kernel
@pytest.mark.parametrize("seed", range(60))
def test_engines_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    data = corrupt(rnd, random_set(rnd))
    stop = rnd.choice([len(data), rnd.randrange(len(data) + 1)])
    fast = outcome(data, stop)
    fast_values = _gathered(data, stop)
    monkeypatch.setattr(walk, "kernel", None)
    assert outcome(data, stop) == fast
    assert _gathered(data, stop) == fast_values


def _gathered(data: bytes, stop: int) -> tuple[list[Any], Any]:
    s = walk.scan(memoryview(data), 0, len(data), stop)
    n = len(s.recs)
    pieces = [walk.Piece(s, 0, n // 2), walk.Piece(s, n // 2, n)]
    values, bad = walk.gather(pieces, True)
    return values.to_pylist(), bad
