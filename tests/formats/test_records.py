"""The v2 record walk (kafka_pyspark._formats.records): the compiled kernel, the pure path
(numpy, then the loop on a problem) and the loop alone give the same fields and the same first
problem, on hand-written golden bytes (kafka_pyspark/_formats/batch_layout.py's record layout) and
on damaged ones.

Each golden record is written byte by byte below; "zz(n)" in a comment is n zigzag-encoded.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kafka_pyspark._formats import decode_log, records
from kafka_pyspark._formats.records import (
    F_END,
    F_HEADER_COUNT,
    F_HEADERS_POS,
    F_OFFSET,
    F_TIMESTAMP,
    FIELDS,
    ST_LEFT,
    ST_LENGTH,
    ST_MALFORMED,
    ST_NEGATIVE,
    ST_OK,
    ST_PAST,
    ST_TRAILING,
)
from kafka_pyspark.errors import CorruptMessageError, InvalidMessageSizeError

WHAT = {name: i for i, name in enumerate(records.WHAT)}
ENGINES = ["kernel", "pure", "loop"]

# length zz(7)=0e | attributes 00 | timestampDelta 00 | offsetDelta 00 | key -1 (zz 01) |
# value length 1 (zz 02) "a" | 0 headers
SMALL = bytes.fromhex("0e 00 00 00 01 02 61 00")
# length zz(12)=18 | 00 | timestampDelta -1 (01) | offsetDelta 3 (06) | key 1 (02) "k" |
# value null (01) | 1 header (02): key length 1 (02) "h", value length 2 (04) "xy"
WITH_HEADER = bytes.fromhex("18 00 01 06 02 6b 01 02 02 68 04 78 79")


def run(engine: str, buf: bytes, counts: list[int], bounds: list[tuple[int, int]] | None = None
        ) -> records.Walk:
    if bounds is None:
        bounds = [(0, len(buf))]
    starts = np.asarray([b[0] for b in bounds], dtype=np.int64)
    ends = np.asarray([b[1] for b in bounds], dtype=np.int64)
    cnt = np.asarray(counts, dtype=np.int64)
    out = np.zeros((FIELDS, records.capacity(starts, ends, cnt)), dtype=np.int64)
    if engine == "kernel":
        if records.kernel is None:
            pytest.skip("the compiled kernel is not built (pure path only)")
        return records.walk_kernel(buf, starts, ends, cnt, out)
    if engine == "pure":
        return records.walk_pure(buf, starts, ends, cnt, out)
    return records.walk_loop(buf, starts, ends, cnt, out)


def problem(w: records.Walk) -> tuple[int, str, int, int, int]:
    return w.status, records.WHAT[w.what], w.value, w.piece, w.record


@pytest.fixture(params=ENGINES)
def engine(request: Any) -> str:
    return str(request.param)


def test_golden_records_fields(engine: str) -> None:
    assert len(WITH_HEADER) == 13
    w = run(engine, SMALL + WITH_HEADER, [2])
    assert w.status == ST_OK
    assert w.fields.T.tolist() == [
        # end, ts, offset, key pos, key len, value pos, value len, headers pos, header count
        [8, 0, 0, 5, -1, 6, 1, 8, 0],
        [21, -1, 3, 13, 1, 15, -1, 16, 1],
    ]
    heads = records.header_positions(SMALL + WITH_HEADER, w.fields)
    assert heads.T.tolist() == [[17, 1, 19, 2]]  # "h" at 17, "xy" at 19


def record_with(fields: bytes) -> bytes:
    """A record whose body (after attributes 00) is ``fields``; its length is one byte."""
    body = b"\x00" + fields
    assert len(body) < 64
    return bytes([len(body) << 1]) + body


INT32_MAX_VARINT = bytes.fromhex("fe ff ff ff 0f")  # zz(2**31 - 1) = 2**32 - 2
INT32_MIN_VARINT = bytes.fromhex("ff ff ff ff 0f")  # zz(-2**31) = 2**32 - 1
INT64_MAX_VARLONG = bytes.fromhex("fe ff ff ff ff ff ff ff ff 01")  # zz(2**63 - 1)
INT64_MIN_VARLONG = bytes.fromhex("ff ff ff ff ff ff ff ff ff 01")  # zz(-2**63)
TAIL = bytes.fromhex("01 01 00")  # null key, null value, 0 headers


@pytest.mark.parametrize(("fields", "ts", "offset"), [
    (b"\x00" + INT32_MAX_VARINT + TAIL, 0, 2**31 - 1),
    (b"\x00" + INT32_MIN_VARINT + TAIL, 0, -(2**31)),
    (INT64_MAX_VARLONG + b"\x00" + TAIL, 2**63 - 1, 0),
    (INT64_MIN_VARLONG + b"\x00" + TAIL, -(2**63), 0),
    # a varint may be written longer than needed (zz(1) in 5 bytes: 82 80 80 80 00)
    (bytes.fromhex("82 80 80 80 80 80 80 80 80 00") + bytes.fromhex("82 80 80 80 00") + TAIL,
     1, 1),
])
def test_varint_edges_that_fit(engine: str, fields: bytes, ts: int, offset: int) -> None:
    w = run(engine, record_with(fields), [1])
    assert w.status == ST_OK
    assert (int(w.fields[F_TIMESTAMP, 0]), int(w.fields[F_OFFSET, 0])) == (ts, offset)


@pytest.mark.parametrize(("data", "expected"), [
    # offsetDelta of 6 bytes: longer than an int32 varint
    (record_with(bytes.fromhex("00 80 80 80 80 80 00") + TAIL), (ST_MALFORMED, "offsetDelta")),
    # offsetDelta raw 2**32 (80 80 80 80 10): 5 bytes, but past 32 bits
    (record_with(bytes.fromhex("00 80 80 80 80 10") + TAIL), (ST_MALFORMED, "offsetDelta")),
    # timestampDelta of 11 bytes, and one of 10 whose last byte carries 2 bits (past 64)
    (record_with(bytes.fromhex("80" * 10 + "00 00") + TAIL), (ST_MALFORMED, "timestampDelta")),
    (record_with(bytes.fromhex("80" * 9 + "02 00") + TAIL), (ST_MALFORMED, "timestampDelta")),
    # the length itself: 6 bytes
    (bytes.fromhex("80 80 80 80 80 00") + bytes(8), (ST_MALFORMED, "length")),
])
def test_overlong_and_out_of_range_varints(engine: str, data: bytes,
                                           expected: tuple[int, str]) -> None:
    assert problem(run(engine, data, [1]))[:2] == expected


@pytest.mark.parametrize(("data", "expected"), [
    # key length -2 (zz 03)
    (record_with(bytes.fromhex("00 00 03 01 00")), (ST_NEGATIVE, "key length", -2)),
    # value length -2
    (record_with(bytes.fromhex("00 00 01 03 00")), (ST_NEGATIVE, "value length", -2)),
    # value length int32 min (far below -1)
    (record_with(bytes.fromhex("00 00 01") + INT32_MIN_VARINT + b"\x00"),
     (ST_NEGATIVE, "value length", -(2**31))),
    # header count -1 (zz 01)
    (record_with(bytes.fromhex("00 00 01 01 01")), (ST_NEGATIVE, "header count", -1)),
    # a header key length -1: header keys are never null
    (record_with(bytes.fromhex("00 00 01 01 02 01 00")),
     (ST_NEGATIVE, "header key length", -1)),
    # a header value length -2
    (record_with(bytes.fromhex("00 00 01 01 02 02 68 03")),
     (ST_NEGATIVE, "header value length", -2)),
    # record length -1 (zz 01) and 5 (below the 6-byte minimum)
    (bytes.fromhex("01") + bytes(10), (ST_LENGTH, "length", -1)),
    (bytes.fromhex("0a") + bytes(10), (ST_LENGTH, "length", 5)),
])
def test_negative_lengths(engine: str, data: bytes, expected: tuple[int, str, int]) -> None:
    assert problem(run(engine, data, [1]))[:3] == expected


@pytest.mark.parametrize(("data", "expected"), [
    # record length 50 (zz 100 = 64 01) with 8 bytes after it
    (bytes.fromhex("64 01") + bytes(8), (ST_LENGTH, "length", 50)),
    # record length int32 max
    (INT32_MAX_VARINT + bytes(8), (ST_LENGTH, "length", 2**31 - 1)),
    # value length 50 in a 7-byte record
    (record_with(bytes.fromhex("00 00 01 64 01 00")), (ST_PAST, "value", 50)),
    # key length int32 max
    (record_with(bytes.fromhex("00 00") + INT32_MAX_VARINT + b"\x01\x00"),
     (ST_PAST, "key", 2**31 - 1)),
    # a header value past the record
    (record_with(bytes.fromhex("00 00 01 01 02 02 68 08 78")), (ST_PAST, "header value", 4)),
    # the header count's varint cut by the record's end (80: continues)
    (record_with(bytes.fromhex("00 00 01 01 80")), (ST_PAST, "header count", 0)),
    # the length's varint cut by the piece's end
    (SMALL + b"\x80", (ST_PAST, "length", 0)),
])
def test_lengths_past_the_record_or_batch(engine: str, data: bytes,
                                          expected: tuple[int, str, int]) -> None:
    count = 2 if data.startswith(SMALL) else 1
    assert problem(run(engine, data, [count]))[:3] == expected


def test_left_over_bytes_and_trailing_bytes(engine: str) -> None:
    # a record 2 bytes longer than its fields (zz(9) = 12 instead of 0e)
    assert problem(run(engine, b"\x12" + SMALL[1:] + b"\0\0", [1])) == (
        ST_LEFT, "record", 2, 0, 0)
    # three bytes after the piece's records; the second piece is at fault
    assert problem(run(engine, SMALL + SMALL + b"abc", [1, 1],
                       [(0, 8), (8, 19)])) == (ST_TRAILING, "record", 3, 1, 1)
    # a count of 2**31 - 1 with two records: fails at record 2, allocates nothing big
    w = run(engine, SMALL + SMALL, [2**31 - 1])
    assert problem(w) == (ST_PAST, "length", 0, 0, 2)
    assert w.fields.shape == (FIELDS, 2)


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(buf))
        op = rng.choice(["flip", "set", "cut", "insert"])
        if op == "flip":
            buf[i] ^= 1 << rng.randrange(8)
        elif op == "set":
            buf[i] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
        elif op == "cut":
            del buf[i : i + rng.randint(1, 3)]
        else:
            buf[i:i] = bytes([rng.randrange(256)])
    return bytes(buf)


@pytest.mark.parametrize("seed", range(4))
def test_engines_agree_on_damaged_records(seed: int) -> None:
    if records.kernel is None:
        pytest.skip("the compiled kernel is not built (pure path only)")
    rng = random.Random(seed)
    pieces = [SMALL * 3, WITH_HEADER + SMALL, record_with(b"\x00" + INT32_MAX_VARINT + TAIL)]
    counts = [3, 2, 1]
    for _ in range(400):
        damaged = [_mutate(rng, p) if rng.random() < 0.5 else p for p in pieces]
        buf = b"".join(damaged)
        cut = np.cumsum([0, *map(len, damaged)]).tolist()
        bounds = list(itertools.pairwise(cut))
        got = [run(e, buf, counts, bounds) for e in ENGINES]
        first = got[0]
        for other in got[1:]:
            assert problem(other) == problem(first), (buf.hex(), problem(first))
            assert other.fields.tolist() == first.fields.tolist(), buf.hex()
        if first.status == ST_OK:
            assert (records.header_positions(buf, first.fields).tolist()
                    == records._header_positions_pure(
                        buf, first.fields, np.zeros((4, int(first.fields[F_HEADER_COUNT].sum())),
                                                    dtype=np.int64)).tolist())


def test_kernel_refuses_arguments_that_do_not_fit() -> None:
    kernel = records.kernel
    if kernel is None:
        pytest.skip("the compiled kernel is not built (pure path only)")
    one = np.ones(1, dtype=np.int64)
    out = np.zeros((FIELDS, 1), dtype=np.int64)
    with pytest.raises(ValueError, match="piece 0 out of range"):  # end past the buffer
        kernel.walk(SMALL, np.zeros(1, np.int64), one * 9, one, out, 1)
    with pytest.raises(ValueError, match="cap"):
        kernel.walk(SMALL, np.zeros(1, np.int64), one * 8, one, out, 2)
    with pytest.raises(ValueError, match="more than 0 records"):
        kernel.walk(SMALL, np.zeros(1, np.int64), one * 8, one, out[:, :0].copy(), 0)
    fields = np.zeros((FIELDS, 1), dtype=np.int64)
    fields[F_END], fields[F_HEADERS_POS], fields[F_HEADER_COUNT] = 99, 0, 1  # end past SMALL
    with pytest.raises(ValueError, match="record 0 does not fit"):
        kernel.headers(SMALL, fields, 1, 1, np.zeros((4, 1), dtype=np.int64), 1)


# --- through decode_log: the error names the record, its batch and the batch's position ---

def test_errors_name_record_and_batch_position() -> None:
    from segment_builder import batch, record

    good = batch(0, [record(0, b"abc"), record(1, b"def")])
    area = good[61:]
    bad = bytearray(good)
    at = 61 + len(area) // 2 + area[len(area) // 2 :].index(b"def") - 1
    bad[at] = 0x03  # the second record's value length: -2
    with pytest.raises(CorruptMessageError, match=r"record 1 of 2: value length -2") as e:
        decode_log(good + bytes(bad), base_position=500, verify_crc=False)
    assert e.value.offset == 500 + len(good)
    bad = bytearray(good)
    bad[61] = 0x64  # the first record's length: 50, past the batch
    with pytest.raises(InvalidMessageSizeError, match=r"record 0 of 2: length 50 does not fit"):
        decode_log(bytes(bad), verify_crc=False)



def test_pure_env_forces_the_python_engine_for_both_kernels() -> None:
    import importlib.util
    import os
    import subprocess
    import sys

    code = ("from kafka_pyspark._formats import records; from kafka_pyspark._messages import walk;"
            "print(records.ENGINE, walk.ENGINE)")
    env = {**os.environ, "KAFKA_PYSPARK_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == ["python", "python"]
    env["KAFKA_PYSPARK_PURE"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    built = importlib.util.find_spec("kafka_pyspark._formats._v2kernel") is not None
    assert out[0] == ("kernel" if built else "python")


def test_binary_column_kernel_and_arrow_agree() -> None:
    buf = bytes(range(256)) * 4
    start = np.asarray([0, 10, 10, 40, 300, 1000], dtype=np.int64)
    length = np.asarray([3, 0, -1, 200, 1, 24], dtype=np.int64)
    expected = [buf[0:3], b"", None, buf[40:240], buf[300:301], buf[1000:1024]]
    got = records.binary_column(buf, start, length)
    assert got.type == "binary" and got.to_pylist() == expected
    arrow = records._binary_take(pa.py_buffer(buf), start, np.maximum(length, 0), length >= 0)
    assert arrow.to_pylist() == expected
    assert got.equals(arrow)
    assert records.binary_column(buf, start[:2], np.asarray([-1, -1])).to_pylist() == [None] * 2


def test_kernel_gather_refuses_slices_that_do_not_fit() -> None:
    kernel = records.kernel
    if kernel is None:
        pytest.skip("the compiled kernel is not built (pure path only)")
    one = np.ones(1, dtype=np.int64)
    data, offsets = pa.allocate_buffer(16), pa.allocate_buffer(8)
    with pytest.raises(ValueError, match="slice 0 does not fit"):  # past the buffer
        kernel.gather(b"abcd", one * 3, one * 2, 1, data, offsets)
    with pytest.raises(ValueError, match="slice 0 does not fit"):  # past the output
        kernel.gather(b"a" * 64, one * 0, one * 17, 1, data, offsets)
    with pytest.raises(ValueError, match="sizes"):  # offsets too short for n + 1
        kernel.gather(b"a" * 64, one * 0, one, 1, data, pa.allocate_buffer(4))
    assert kernel.gather(b"abcd", one, one * 2, 1, data, offsets) == 2
    assert data.to_pybytes()[:2] == b"bc"
    assert np.frombuffer(offsets, dtype=np.int32).tolist() == [0, 2]
