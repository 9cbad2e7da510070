"""Record batches (magic 2) -> Arrow columns (layout: :mod:`.layout`).

Per batch (Python, one header unpack): CRC-32C check, decompression, control batches turned
into :class:`Marker` s. Then all records of all batches are parsed together: one walk over the
record lengths (a Python loop, one varint each), then every field of every record at once with
numpy (:func:`.varint.read_many`), key and value bytes gathered into Arrow in one ``take``.
Only records that carry headers are parsed one by one for their headers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark.errors import CorruptMessageError, InvalidMessageSizeError, UnknownCodecError
from kafka_pyspark.formats import codecs
from kafka_pyspark.formats.layout import (
    BATCH_CODEC_MASK,
    BATCH_CONTROL,
    BATCH_CRC_START,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    BATCH_TIMESTAMP_TYPE,
    BATCH_TRANSACTIONAL,
    CODEC_NAMES,
    CODEC_NONE,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    ENTRY_HEADER_SIZE,
    HEADER_TYPE,
    HEADERS_TYPE,
    LOG_APPEND_TIME,
    LOG_SCHEMA,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE,
)
from kafka_pyspark.formats.varint import VARINT_MAX, VARLONG_MAX, read_many, read_one
from kafka_pyspark.wire.protocol import INT32_MAX

I64 = npt.NDArray[np.int64]
Bool = npt.NDArray[np.bool_]

_MIN_RECORD = 6  # attributes + 5 one-byte varints (empty key and value, no headers)
_RUN_MIN = 8  # records of one size from which the walk confirms them in bulk
Buffer = bytes | memoryview
_CODEC_STRINGS = pa.array([CODEC_NAMES.get(i, "") for i in range(8)], pa.string())
_TS_LIMIT = (1 << 63) // 1000  # ms beyond this do not fit a microsecond timestamp


@dataclass(frozen=True)
class TxnBatch:
    """A transactional data batch: rows ``[row_start, row_end)`` of the decoded batch."""

    position: int
    producer_id: int
    base_offset: int
    last_offset: int
    row_start: int
    row_end: int


@dataclass(frozen=True)
class Marker:
    """A control record: the end of ``producer_id``'s transaction (commit or abort)."""

    position: int
    producer_id: int
    offset: int
    commit: bool


@dataclass
class V2Result:
    batch: pa.RecordBatch  # LOG_SCHEMA
    txn: list[TxnBatch]
    markers: list[Marker]


class _Batches:
    """The per-batch facts of the data batches of one call, as parallel lists."""

    def __init__(self) -> None:
        self.pieces: list[bytes | memoryview] = []
        self.area: list[int] = []  # where each piece starts in the chunk (uncompressed ones)
        self.position: list[int] = []
        self.count: list[int] = []
        self.base_offset: list[int] = []
        self.base_ts: list[int] = []
        self.max_ts: list[int] = []
        self.ts_type: list[int] = []
        self.codec: list[int] = []
        self.txn: list[tuple[int, int, int]] = []  # (batch index, producer id, last offset)


def _control_markers(data: bytes | memoryview, h: tuple[int, ...], pos: int) -> list[Marker]:
    base, pid, count = h[0], h[9], h[12]
    out: list[Marker] = []
    p, end = 0, len(data)
    for _ in range(count):
        try:
            length, p = read_one(data, p, end)
            rec_end = p + length
            _, q = read_one(data, p + 1, rec_end)  # timestampDelta
            delta, q = read_one(data, q, rec_end)
            klen, q = read_one(data, q, rec_end)
        except CorruptMessageError:
            raise CorruptMessageError("control batch holds a malformed control record",
                                      offset=pos) from None
        if length < _MIN_RECORD or rec_end > end or klen < CONTROL_KEY.size or q + klen > rec_end:
            raise CorruptMessageError("control batch holds a malformed control record",
                                      offset=pos)
        _, kind = CONTROL_KEY.unpack_from(data, q)
        if kind in (CONTROL_ABORT, CONTROL_COMMIT):
            out.append(Marker(pos, pid, base + delta, kind == CONTROL_COMMIT))
        p = rec_end
    return out


def _read_batches(
    mv: memoryview, starts: list[int], base: int, verify: bool, limit: int
) -> tuple[_Batches, list[Marker]]:
    b = _Batches()
    markers: list[Marker] = []
    unpack = BATCH_HEADER.unpack_from
    for s in starts:
        h = unpack(mv, s)
        pos = base + s
        end = s + ENTRY_HEADER_SIZE + h[1]
        if verify:
            actual = crc32c.crc32c(mv[s + BATCH_CRC_START : end])
            if actual != h[4]:
                raise CorruptMessageError(
                    f"record batch CRC-32C mismatch: stored {h[4]:#010x}, computed "
                    f"{actual:#010x}", offset=pos)
        attributes, count = h[5], h[12]
        codec = attributes & BATCH_CODEC_MASK
        if codec not in CODEC_NAMES:
            raise UnknownCodecError(f"record batch has unknown codec {codec}", offset=pos)
        if count < 0:
            raise InvalidMessageSizeError(f"record batch has {count} records", offset=pos)
        area = mv[s + BATCH_HEADER_SIZE : end]
        data = area if codec == CODEC_NONE else codecs.decompress(codec, area, limit, offset=pos)
        if attributes & BATCH_CONTROL:
            markers.extend(_control_markers(data, h, pos))
            continue
        if count == 0:
            continue
        if attributes & BATCH_TRANSACTIONAL:
            b.txn.append((len(b.count), h[9], h[0] + h[6]))
        b.pieces.append(data)
        b.area.append(s + BATCH_HEADER_SIZE)
        b.position.append(pos)
        b.count.append(count)
        b.base_offset.append(h[0])
        b.base_ts.append(h[7])
        b.max_ts.append(h[8])
        b.ts_type.append(LOG_APPEND_TIME if attributes & BATCH_TIMESTAMP_TYPE else 0)
        b.codec.append(codec)
    return b, markers


def _length(buf: Buffer, p: int, e: int, i: int, k: int, b: _Batches) -> tuple[int, int]:
    """The length varint of record ``i`` of batch ``k`` at ``p``, and where the record body
    starts; checked against the piece's end ``e``."""
    c = buf[p] if p < e else 0x80
    if c < 0x80:
        length, q = (c >> 1) ^ -(c & 1), p + 1
    elif p + 1 < e and buf[p + 1] < 0x80:
        raw = (c & 0x7F) | (buf[p + 1] << 7)
        length, q = (raw >> 1) ^ -(raw & 1), p + 2
    else:
        try:
            length, q = read_one(buf, p, e)
        except CorruptMessageError:
            raise CorruptMessageError(f"record {i} of {b.count[k]}: malformed or missing length",
                                      offset=b.position[k]) from None
    if length < _MIN_RECORD or q + length > e:
        raise InvalidMessageSizeError(
            f"record {i} of {b.count[k]}: length {length} does not fit the batch",
            offset=b.position[k])
    return length, q


def _walk(buf: Buffer, arr: npt.NDArray[np.uint8], b: _Batches, piece_start: list[int]
          ) -> tuple[I64, I64]:
    """Body start and end of every record. One length varint per record in Python, except in
    runs of records of one size: those are confirmed together by comparing every record's
    length bytes with numpy (a record's length bytes fix where the next one starts)."""
    parts: list[I64] = []
    singles: list[int] = []
    sizes: list[int] = []
    for k, piece in enumerate(b.pieces):
        p = piece_start[k]
        e = p + len(piece)
        count = b.count[k]
        i, prev = 0, -1
        while i < count:
            length, q = _length(buf, p, e, i, k, b)
            size = q - p + length
            n = min(count - i, (e - p) // size)
            if size == prev and n >= _RUN_MIN:
                pos = p + size * np.arange(n, dtype=np.int64)
                same = (arr[pos[:, None] + np.arange(q - p)] == arr[p:q]).all(axis=1)
                run = n if same.all() else int(np.argmin(same))
                if singles:
                    parts.append(np.asarray(singles, dtype=np.int64))
                    parts.append(np.asarray(sizes, dtype=np.int64))
                    singles, sizes = [], []
                parts.append(pos[:run] + (q - p))
                parts.append(np.full(run, length, dtype=np.int64))
                p += run * size
                i += run
                prev = -1
                continue
            singles.append(q)
            sizes.append(length)
            p = q + length
            i += 1
            prev = size
        if p != e:
            raise InvalidMessageSizeError(
                f"{e - p} bytes after the batch's {b.count[k]} records", offset=b.position[k])
    if singles:
        parts.append(np.asarray(singles, dtype=np.int64))
        parts.append(np.asarray(sizes, dtype=np.int64))
    starts = np.concatenate(parts[0::2]) if parts else np.zeros(0, np.int64)
    lengths = np.concatenate(parts[1::2]) if parts else np.zeros(0, np.int64)
    return starts, starts + lengths


class _Fields:
    """Lock-step parse of every record's fields; errors name the record and its batch."""

    def __init__(self, arr: npt.NDArray[np.uint8], b: _Batches, ends: I64, rb: I64) -> None:
        self.arr = arr
        self.b = b
        self.ends = ends
        self.rb = rb
        self.first = np.cumsum([0, *b.count[:-1]]).astype(np.int64)

    def fail(self, i: int, what: str) -> CorruptMessageError:
        k = int(self.rb[i])
        return CorruptMessageError(
            f"record {i - int(self.first[k])} of {self.b.count[k]}: {what}",
            offset=self.b.position[k])

    def varint(self, p: I64, width: int, what: str) -> tuple[I64, I64]:
        values, lengths, bad = read_many(self.arr, p, width)
        if bad < len(p):
            raise self.fail(bad, f"malformed {what} varint")
        p = p + lengths
        self.within(p, what)
        return values, p

    def within(self, p: I64, what: str) -> None:
        over = p > self.ends
        if over.any():
            raise self.fail(int(np.argmax(over)), f"{what} runs past the record's end")

    def blob(self, p: I64, what: str) -> tuple[I64, I64, Bool, I64]:
        length, p = self.varint(p, VARINT_MAX, f"{what} length")
        if (length < -1).any():
            i = int(np.argmax(length < -1))
            raise self.fail(i, f"{what} length {int(length[i])}")
        present = length >= 0
        size = np.where(present, length, 0)
        start = p
        p = p + size
        self.within(p, what)
        return start, size, present, p


def _binary(buffer: pa.Buffer, start: I64, size: I64, present: Bool) -> pa.Array:
    """The slices ``[start, start + size)`` of ``buffer`` (in order, not overlapping) as one
    binary column, null where not ``present``: a zero-copy array tiling the buffer (gap, slice,
    gap, slice, ...), then one ``take`` of the slices."""
    n = len(start)
    if not present.any():
        return pa.nulls(n, pa.binary())
    small = buffer.size < INT32_MAX  # tiled with int32 offsets
    bounds = np.empty(2 * n + 1, dtype=np.int32 if small else np.int64)
    bounds[0] = 0
    bounds[1::2] = start
    bounds[2::2] = start + size
    kind = pa.binary() if small else pa.large_binary()
    tiles = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(bounds), buffer])
    index = pa.array(np.arange(1, 2 * n, 2, dtype=np.int64), mask=None if present.all()
                     else ~present)
    out = tiles.take(index)
    return out if small else out.cast(pa.binary())


def _headers(buf: Buffer, f: _Fields, p: I64, count: I64) -> tuple[pa.Array, I64]:
    """The headers column; ``p`` moved past each record's headers."""
    offsets = np.zeros(len(p) + 1, dtype=np.int32)
    np.cumsum(count, out=offsets[1:])
    keys: list[str] = []
    values: list[bytes | None] = []
    p = p.copy()
    for i in np.flatnonzero(count).tolist():
        q, end = int(p[i]), int(f.ends[i])
        try:
            for _ in range(int(count[i])):
                klen, q = read_one(buf, q, end)
                if klen < 0 or q + klen > end:
                    raise CorruptMessageError(f"header key length {klen}")
                keys.append(bytes(buf[q : q + klen]).decode("utf-8"))
                q += klen
                vlen, q = read_one(buf, q, end)
                if vlen < -1 or q + max(vlen, 0) > end:
                    raise CorruptMessageError(f"header value length {vlen}")
                values.append(None if vlen < 0 else bytes(buf[q : q + vlen]))
                q += max(vlen, 0)
        except (CorruptMessageError, UnicodeDecodeError) as e:
            raise f.fail(i, f"bad header: {e}") from None
        p[i] = q
    child = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], fields=list(HEADER_TYPE)
    )
    return pa.ListArray.from_arrays(pa.array(offsets), child, type=HEADERS_TYPE), p


def _timestamps(b: _Batches, rb: I64, delta: I64) -> pa.Array:
    base = np.asarray(b.base_ts, dtype=np.int64)[rb]
    log_append = (np.asarray(b.ts_type, dtype=np.int64) == LOG_APPEND_TIME)[rb]
    ms = np.where(log_append, np.asarray(b.max_ts, dtype=np.int64)[rb], base + delta)
    valid = (ms != NO_TIMESTAMP) & (np.abs(ms) < _TS_LIMIT)
    return pa.array(np.where(valid, ms, 0) * 1000, TIMESTAMP_TYPE, mask=~valid)


def _columns(mv: memoryview, b: _Batches) -> pa.RecordBatch:
    buf: Buffer
    if all(c == CODEC_NONE for c in b.codec):  # the records are read where they are
        buf, piece_start = mv, b.area
    else:  # decompressed and raw pieces, one after another
        buf = b"".join(b.pieces)
        piece_start = list(itertools.accumulate((len(x) for x in b.pieces[:-1]), initial=0))
    arr = np.frombuffer(buf, dtype=np.uint8)
    starts, ends = _walk(buf, arr, b, piece_start)
    counts = np.asarray(b.count, dtype=np.int64)
    rb = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    f = _Fields(arr, b, ends, rb)
    p = starts + 1  # attributes (unused)
    ts_delta, p = f.varint(p, VARLONG_MAX, "timestampDelta")
    off_delta, p = f.varint(p, VARINT_MAX, "offsetDelta")
    kstart, ksize, kpresent, p = f.blob(p, "key")
    vstart, vsize, vpresent, p = f.blob(p, "value")
    hcount, p = f.varint(p, VARINT_MAX, "header count")
    if (hcount < 0).any():
        raise f.fail(int(np.argmax(hcount < 0)), "negative header count")
    headers, p = _headers(buf, f, p, hcount)
    if (p != ends).any():
        i = int(np.argmax(p != ends))
        raise f.fail(i, f"{int(ends[i] - p[i])} bytes left after its fields")
    buffer = pa.py_buffer(buf)
    offsets = np.asarray(b.base_offset, dtype=np.int64)[rb] + off_delta
    codec = _CODEC_STRINGS.take(pa.array(np.asarray(b.codec, dtype=np.int64)[rb]))
    columns = [
        pa.array(offsets, pa.int64()),
        pa.array(offsets + 1, pa.int64()),
        pa.array((np.arange(len(rb), dtype=np.int64) - f.first[rb]).astype(np.int32)),
        codec,
        _binary(buffer, vstart, vsize, vpresent),
        _binary(buffer, kstart, ksize, kpresent),
        _timestamps(b, rb, ts_delta),
        pa.array(np.asarray(b.ts_type, dtype=np.int32)[rb], pa.int32()),
        headers,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=LOG_SCHEMA)


def decode_batches(
    mv: memoryview, starts: list[int], base: int, *, verify_crc: bool, max_decompressed_size: int
) -> V2Result:
    """The records of the complete record batches at ``starts`` of ``mv`` (``base`` is the
    position of ``mv[0]`` in the file: errors name ``base + start`` of the batch at fault)."""
    b, markers = _read_batches(mv, starts, base, verify_crc, max_decompressed_size)
    if not b.pieces:
        return V2Result(pa.RecordBatch.from_pylist([], schema=LOG_SCHEMA), [], markers)
    batch = _columns(mv, b)
    first = np.cumsum([0, *b.count]).tolist()
    txn = [
        TxnBatch(b.position[k], pid, b.base_offset[k], last, first[k], first[k + 1])
        for k, pid, last in b.txn
    ]
    return V2Result(batch, txn, markers)
