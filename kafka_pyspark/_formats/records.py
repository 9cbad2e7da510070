"""The record walk of record batches (magic 2): every record's fields, by the compiled kernel
(``_v2kernel.c``) or by its pure-Python twin (same results).

:func:`walk` reads the records of several *pieces* (the records area of a batch, uncompressed
or decompressed) in one call and returns their fields as int64 rows (:data:`FIELDS`: end,
timestampDelta, offsetDelta, key and value position and length, where the headers start and
how many) or the first problem: what it is (``ST_*``), which field (``W_*``), the offending
value, and which record of which piece. :func:`header_positions` lists the key and value
positions of every header of walked records.

The kernel is used when it imports (see :mod:`kafka_pyspark._shared.native`;
``KAFKA_PYSPARK_PURE=1``
forces the pure path); :data:`ENGINE` names the one in use. The pure path walks valid data
with numpy (the lengths one record at a time, confirmed in bulk over runs of records of one
size; every field at once for all records) and, when anything is wrong, walks again one
record at a time (:func:`walk_loop`, a line-by-line twin of the kernel) to find the first
problem exactly as the kernel does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._formats.varint import (
    I64,
    VARINT_MALFORMED,
    VARINT_MAX,
    VARINT_PAST,
    VARLONG_MAX,
    read_many,
    read_one_checked,
)
from kafka_pyspark._messages.arrays import int_array
from kafka_pyspark._shared.native import load_kernel
from kafka_pyspark._wire.protocol import INT32_MAX

Bool = npt.NDArray[np.bool_]
Buffer = bytes | bytearray | memoryview

# fields of a walked record (rows of Walk.fields; the kernel's F_*)
F_END, F_TIMESTAMP, F_OFFSET, F_KEY_POS, F_KEY_LEN, F_VALUE_POS, F_VALUE_LEN = range(7)
F_HEADERS_POS, F_HEADER_COUNT = 7, 8
FIELDS = 9
# fields of a header (rows of header_positions; the kernel's H_*)
H_KEY_POS, H_KEY_LEN, H_VALUE_POS, H_VALUE_LEN = range(4)
HFIELDS = 4

# what went wrong (the kernel's ST_*)
ST_OK = 0
ST_MALFORMED = VARINT_MALFORMED  # a varint longer than its width, or out of its range
ST_PAST = VARINT_PAST  # a varint or bytes run past the record's (the piece's) end
ST_NEGATIVE = 3  # a length or count below its minimum (value)
ST_LENGTH = 4  # a record length (value) below 6 or past the piece's end
ST_LEFT = 5  # value bytes of the record left after its fields
ST_TRAILING = 6  # value bytes of the piece left after its records
# the field at fault (the kernel's W_*), as error texts name it
WHAT = ("length", "timestampDelta", "offsetDelta", "key length", "key", "value length",
        "value", "header count", "header key length", "header key", "header value length",
        "header value", "record")
(W_LENGTH, W_TIMESTAMP, W_OFFSET, W_KEY_LENGTH, W_KEY, W_VALUE_LENGTH, W_VALUE, W_HEADER_COUNT,
 W_HEADER_KEY_LENGTH, W_HEADER_KEY, W_HEADER_VALUE_LENGTH, W_HEADER_VALUE,
 W_RECORD) = range(len(WHAT))

MIN_RECORD = 6  # attributes + five one-byte varints
_MIN_SIZE = MIN_RECORD + 1  # with its length varint
_RUN_MIN = 8  # records of one size from which the numpy walk confirms them in bulk

# Every fact _v2kernel.c repeats, as it exports it: a build that disagrees (a drift, a stale
# build) is not used, with a warning (kafka_pyspark._shared.native.load_kernel).
KERNEL_CONSTANTS: Mapping[str, int] = {
    "MIN_RECORD": MIN_RECORD, "VARINT_MAX": VARINT_MAX, "VARLONG_MAX": VARLONG_MAX,
    "F_END": F_END, "F_TIMESTAMP": F_TIMESTAMP, "F_OFFSET": F_OFFSET, "F_KEY_POS": F_KEY_POS,
    "F_KEY_LEN": F_KEY_LEN, "F_VALUE_POS": F_VALUE_POS, "F_VALUE_LEN": F_VALUE_LEN,
    "F_HEADERS_POS": F_HEADERS_POS, "F_HEADER_COUNT": F_HEADER_COUNT, "FIELDS": FIELDS,
    "H_KEY_POS": H_KEY_POS, "H_KEY_LEN": H_KEY_LEN, "H_VALUE_POS": H_VALUE_POS,
    "H_VALUE_LEN": H_VALUE_LEN, "HFIELDS": HFIELDS,
    "ST_OK": ST_OK, "ST_MALFORMED": ST_MALFORMED, "ST_PAST": ST_PAST,
    "ST_NEGATIVE": ST_NEGATIVE, "ST_LENGTH": ST_LENGTH, "ST_LEFT": ST_LEFT,
    "ST_TRAILING": ST_TRAILING,
    "W_LENGTH": W_LENGTH, "W_TIMESTAMP": W_TIMESTAMP, "W_OFFSET": W_OFFSET,
    "W_KEY_LENGTH": W_KEY_LENGTH, "W_KEY": W_KEY, "W_VALUE_LENGTH": W_VALUE_LENGTH,
    "W_VALUE": W_VALUE, "W_HEADER_COUNT": W_HEADER_COUNT,
    "W_HEADER_KEY_LENGTH": W_HEADER_KEY_LENGTH, "W_HEADER_KEY": W_HEADER_KEY,
    "W_HEADER_VALUE_LENGTH": W_HEADER_VALUE_LENGTH, "W_HEADER_VALUE": W_HEADER_VALUE,
    "W_RECORD": W_RECORD,
}
kernel = load_kernel("kafka_pyspark._formats._v2kernel", constants=KERNEL_CONSTANTS)
ENGINE = "kernel" if kernel is not None else "python"


class Walk(NamedTuple):
    """What :func:`walk` found: ``fields[:, :n]`` are the records before the problem."""

    fields: I64  # (FIELDS, n)
    status: int
    what: int
    value: int
    piece: int
    record: int


def _allocate(rows: int, cap: int) -> I64:
    # from Arrow's pool (it keeps freed memory): an mmap per call costs more than the walk
    raw = pa.allocate_buffer(max(1, rows * cap) * 8)
    return np.frombuffer(raw, dtype=np.int64)[: rows * cap].reshape(rows, cap)


def walk(buf: Buffer, starts: I64, ends: I64, counts: I64) -> Walk:
    """The records of the pieces ``buf[starts[k]:ends[k]]``, ``counts[k]`` of them in each."""
    out = _allocate(FIELDS, capacity(starts, ends, counts))
    if kernel is not None:
        return walk_kernel(buf, starts, ends, counts, out)
    return walk_pure(buf, starts, ends, counts, out)


def capacity(starts: I64, ends: I64, counts: I64) -> int:
    # no piece holds more records than 7-byte records would fill: a hostile count costs no memory
    return int(np.minimum(counts, (ends - starts) // _MIN_SIZE).sum())


def walk_kernel(buf: Buffer, starts: I64, ends: I64, counts: I64, out: I64) -> Walk:
    """:func:`walk` by the kernel (which must be there) into ``out`` (FIELDS, capacity)."""
    assert kernel is not None
    n, status, what, value, piece, record = kernel.walk(buf, starts, ends, counts, out,
                                                        out.shape[1])
    return Walk(out[:, :n], status, what, value, piece, record)


def walk_pure(buf: Buffer, starts: I64, ends: I64, counts: I64, out: I64) -> Walk:
    """:func:`walk` in Python: numpy over valid data, :func:`walk_loop` to find a problem."""
    if _walk_numpy(buf, starts, ends, counts, out):
        return Walk(out[:, : int(counts.sum())], ST_OK, 0, 0, len(starts), 0)
    return walk_loop(buf, starts, ends, counts, out)


def header_positions(buf: Buffer, fields: I64) -> I64:
    """Key position, key length, value position, value length (-1: null) of every header of
    the walked records ``fields``, in order: (HFIELDS, total headers)."""
    counts = fields[F_HEADER_COUNT]
    total = int(counts.sum())
    out = _allocate(HFIELDS, total)
    if kernel is not None:
        n = fields.shape[1]
        kernel.headers(buf, np.ascontiguousarray(fields), n, n, out, total)
        return out
    return _header_positions_pure(buf, fields, out)


def _header_positions_pure(buf: Buffer, fields: I64, out: I64) -> I64:
    counts = fields[F_HEADER_COUNT]
    k = 0
    for i in np.flatnonzero(counts).tolist():
        q, end = int(fields[F_HEADERS_POS, i]), int(fields[F_END, i])
        for _ in range(int(counts[i])):
            for pos_row, least in ((H_KEY_POS, 0), (H_VALUE_POS, -1)):
                st, n, q = read_one_checked(buf, q, end, VARINT_MAX)
                if st or n < least or n > end - q:
                    raise ValueError(f"headers: record {i} does not match")
                out[pos_row, k], out[pos_row + 1, k] = q, n
                q += max(n, 0)
            k += 1
    return out


def _blob(buf: Buffer, q: int, end: int, least: int, w: int) -> tuple[int, int, int, int]:
    """(status, what, value or length, position after): a length-prefixed byte string."""
    st, n, q2 = read_one_checked(buf, q, end, VARINT_MAX)
    if st:
        return st, w, 0, q
    if n < least:
        return ST_NEGATIVE, w, n, q
    if n > end - q2:
        return ST_PAST, w + 1, n, q
    return ST_OK, w, n, q2 + max(n, 0)


def _record(buf: Buffer, at: int, end: int, f: list[int]) -> tuple[int, int, int, int]:
    """One record at ``at`` of a piece ending at ``end`` (the kernel's ``record``): its fields
    into ``f``; (status, what, value, position after)."""
    st, length, q = read_one_checked(buf, at, end, VARINT_MAX)
    if st:
        return st, W_LENGTH, 0, at
    if length < MIN_RECORD or length > end - q:
        return ST_LENGTH, W_LENGTH, length, at
    rend = q + length
    q += 1  # attributes (unused)
    for row, width, w in ((F_TIMESTAMP, VARLONG_MAX, W_TIMESTAMP),
                          (F_OFFSET, VARINT_MAX, W_OFFSET)):
        st, f[row], q = read_one_checked(buf, q, rend, width)
        if st:
            return st, w, 0, at
    for pos_row, w in ((F_KEY_POS, W_KEY_LENGTH), (F_VALUE_POS, W_VALUE_LENGTH)):
        st, w, n, q2 = _blob(buf, q, rend, -1, w)
        if st:
            return st, w, n, at
        f[pos_row], f[pos_row + 1], q = q2 - max(n, 0), n, q2
    st, count, q = read_one_checked(buf, q, rend, VARINT_MAX)
    if st:
        return st, W_HEADER_COUNT, 0, at
    if count < 0:
        return ST_NEGATIVE, W_HEADER_COUNT, count, at
    f[F_HEADERS_POS], f[F_HEADER_COUNT] = q, count
    for _ in range(count):  # every header takes 2 bytes or fails: bounded by the record
        for least, w in ((0, W_HEADER_KEY_LENGTH), (-1, W_HEADER_VALUE_LENGTH)):
            st, w, n, q = _blob(buf, q, rend, least, w)
            if st:
                return st, w, n, at
    if q != rend:
        return ST_LEFT, W_RECORD, rend - q, at
    f[F_END] = rend
    return ST_OK, 0, 0, rend


def walk_loop(buf: Buffer, starts: I64, ends: I64, counts: I64, out: I64) -> Walk:
    """:func:`walk` one record at a time, line by line as the kernel does."""
    n = 0
    f = [0] * FIELDS
    for k in range(len(starts)):
        at, end = int(starts[k]), int(ends[k])
        for r in range(int(counts[k])):
            st, what, value, at = _record(buf, at, end, f)
            if st:
                return Walk(out[:, :n], st, what, value, k, r)
            out[:, n] = f
            n += 1
        if at != end:
            return Walk(out[:, :n], ST_TRAILING, W_RECORD, end - at, k, int(counts[k]))
    return Walk(out[:, :n], ST_OK, 0, 0, len(starts), 0)


def _lengths(buf: Buffer, arr: npt.NDArray[np.uint8], starts: I64, ends: I64, counts: I64,
             out: I64) -> I64 | None:
    """Body starts of every record (``out[F_END]`` gets the ends), or None on any problem.
    One length varint per record in Python, except in runs of records of one size: those are
    confirmed together by comparing every record's length bytes with numpy (a record's
    length bytes fix where the next one starts)."""
    body = np.empty(out.shape[1], dtype=np.int64)
    n = 0
    for k in range(len(starts)):
        p, e, count = int(starts[k]), int(ends[k]), int(counts[k])
        i, prev = 0, -1
        while i < count:
            st, length, q = read_one_checked(buf, p, e, VARINT_MAX)
            if st or length < MIN_RECORD or length > e - q or n >= len(body):
                return None
            size = q - p + length
            run = min(count - i, (e - p) // size)
            if size == prev and run >= _RUN_MIN:
                pos = p + size * np.arange(run, dtype=np.int64)
                same = (arr[pos[:, None] + np.arange(q - p)] == arr[p:q]).all(axis=1)
                run = run if same.all() else int(np.argmin(same))
                body[n : n + run] = pos[:run] + (q - p)
                out[F_END, n : n + run] = pos[:run] + size
                n, p, i, prev = n + run, p + run * size, i + run, -1
                continue
            body[n], out[F_END, n] = q, q + length
            n, p, i, prev = n + 1, q + length, i + 1, size
        if p != e:
            return None
    return body


def _walk_numpy(buf: Buffer, starts: I64, ends: I64, counts: I64, out: I64) -> bool:
    """The fields of every record into ``out``; False on any problem (nothing says which)."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    body = _lengths(buf, arr, starts, ends, counts, out)
    if body is None:
        return False
    end = out[F_END]
    p = body + 1  # attributes (unused)
    for row, width in ((F_TIMESTAMP, VARLONG_MAX), (F_OFFSET, VARINT_MAX),
                       (F_KEY_LEN, VARINT_MAX), (F_VALUE_LEN, VARINT_MAX),
                       (F_HEADER_COUNT, VARINT_MAX)):
        if (p >= end).any():  # every varint needs a byte before the record's end
            return False
        values, sizes, bad = read_many(arr, p, width)
        if bad < len(p):
            return False
        p = p + sizes
        out[row] = values
        if row in (F_KEY_LEN, F_VALUE_LEN):
            if (values < -1).any():
                return False
            out[row - 1] = p
            p = p + np.maximum(values, 0)
        if (p > end).any():
            return False
    if (out[F_HEADER_COUNT] < 0).any():
        return False
    out[F_HEADERS_POS] = p
    for i in np.flatnonzero(out[F_HEADER_COUNT]).tolist():
        q, rend = int(p[i]), int(end[i])
        for _ in range(int(out[F_HEADER_COUNT, i])):
            for least, w in ((0, W_HEADER_KEY_LENGTH), (-1, W_HEADER_VALUE_LENGTH)):
                st, _, _, q = _blob(buf, q, rend, least, w)
                if st:
                    return False
        p[i] = q
    return bool((p == end).all())


def binary_column(buf: Buffer, start: I64, length: I64) -> pa.Array:
    """The slices ``buf[start[i] : start[i] + length[i]]`` (in order, not overlapping) as one
    binary column, null where ``length`` is negative: copied by the kernel in one pass, or
    (pure path, or past int32 offsets) gathered by Arrow with :func:`_binary_take`."""
    n = len(start)
    present = length >= 0
    if not present.any():
        return pa.nulls(n, pa.binary())
    size = np.maximum(length, 0)
    total = int(size.sum())
    if kernel is not None and total < INT32_MAX:
        data = pa.allocate_buffer(total)
        offsets = pa.allocate_buffer(4 * (n + 1))
        kernel.gather(buf, np.ascontiguousarray(start), np.ascontiguousarray(length), n, data,
                      offsets)
        nulls = n - int(np.count_nonzero(present))
        validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
        return pa.Array.from_buffers(pa.binary(), n, [validity, offsets, data],
                                     null_count=nulls)
    return _binary_take(pa.py_buffer(buf), start, size, present)


def _binary_take(buffer: pa.Buffer, start: I64, size: I64, present: Bool) -> pa.Array:
    """:func:`binary_column` by Arrow: a zero-copy array tiling the buffer (gap, slice, gap,
    slice, ...), then one ``take`` of the slices."""
    n = len(start)
    small = buffer.size < INT32_MAX  # tiled with int32 offsets
    bounds = np.empty(2 * n + 1, dtype=np.int32 if small else np.int64)
    bounds[0] = 0
    bounds[1::2] = start
    bounds[2::2] = start + size
    kind = pa.binary() if small else pa.large_binary()
    tiles = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(bounds), buffer])
    index = int_array(np.arange(1, 2 * n, 2, dtype=np.int64), present)
    out = tiles.take(index)
    return out if small else out.cast(pa.binary())
