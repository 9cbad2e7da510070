"""Record batches (magic 2) -> Arrow columns (layout: :mod:`.layout`).

Per batch (Python, one header unpack): CRC-32C check, decompression, control batches turned
into :class:`Marker` s. Then all records of all batches are walked together
(:func:`.records.walk`: the compiled kernel, or its pure-Python twin), and the columns are
built from the walked fields with numpy; key, value and header bytes are gathered into Arrow
with one ``take`` each.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kafka_pyspark._formats import codecs, records
from kafka_pyspark._formats.batch_layout import (
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
    EMPTY_LOG_BATCH,
    ENTRY_HEADER_SIZE,
    HEADER_TYPE,
    HEADERS_TYPE,
    LOG_APPEND_TIME,
    LOG_SCHEMA,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE,
)
from kafka_pyspark._formats.records import Buffer
from kafka_pyspark._formats.varint import I64, read_one
from kafka_pyspark._messages.arrays import int_array, string_array
from kafka_pyspark.errors import (
    CorruptMessageError,
    InvalidMessageSizeError,
    MessageError,
    UnknownCodecError,
)

_CODEC_STRINGS = string_array([CODEC_NAMES.get(i, "") for i in range(8)])
_constant_codecs: dict[int, pa.Array] = {}  # immutable arrays: slices are safe to share
_empty_headers: pa.Array = pa.nulls(0, HEADERS_TYPE)  # grown by _no_headers
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
        if (length < records.MIN_RECORD or rec_end > end or klen < CONTROL_KEY.size
                or q + klen > rec_end):
            raise CorruptMessageError("control batch holds a malformed control record",
                                      offset=pos)
        _, kind = CONTROL_KEY.unpack_from(data, q)
        if kind in (CONTROL_ABORT, CONTROL_COMMIT):
            out.append(Marker(pos, pid, base + delta, kind == CONTROL_COMMIT))
        p = rec_end
    return out


def _crc32c(data: memoryview) -> int:
    """CRC-32C of ``data``; the ``crc32c`` package is imported on first use (it takes as long
    to import as the rest of ``_formats``, and only segment files of later Kafkas need it)."""
    import crc32c

    return int(crc32c.crc32c(data))


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
            actual = _crc32c(mv[s + BATCH_CRC_START : end])
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


def _problem(w: records.Walk, b: _Batches) -> MessageError:
    """The typed error for the problem :func:`records.walk` found, naming record and batch."""
    k, count = w.piece, b.count[w.piece]
    if w.status == records.ST_TRAILING:
        return InvalidMessageSizeError(f"{w.value} bytes after the batch's {count} records",
                                       offset=b.position[k])
    name = records.WHAT[w.what]
    if w.status == records.ST_LENGTH:
        return InvalidMessageSizeError(
            f"record {w.record} of {count}: length {w.value} does not fit the batch",
            offset=b.position[k])
    if w.status == records.ST_MALFORMED or (w.status == records.ST_PAST
                                            and w.what == records.W_LENGTH):
        what = ("malformed or missing length" if w.what == records.W_LENGTH
                else f"malformed {name} varint")
    elif w.status == records.ST_PAST:
        what = f"{name} runs past the record's end"
    elif w.status == records.ST_NEGATIVE:
        what = f"{name} {w.value}"
    else:  # ST_LEFT
        what = f"{w.value} bytes left after its fields"
    return CorruptMessageError(f"record {w.record} of {count}: {what}", offset=b.position[k])


def _utf8(binary: pa.Array) -> pa.Array | int:
    """``binary`` as a string column, or the index of its first item that is not UTF-8."""
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        pass
    for j, item in enumerate(binary.to_pylist()):
        try:
            item.decode("utf-8")
        except UnicodeDecodeError:
            return j
    raise AssertionError("Arrow and Python disagree on UTF-8")  # pragma: no cover


def _headers(buf: Buffer, fields: I64, fail: Callable[[int, str], MessageError]) -> pa.Array:
    """The headers column of the walked records ``fields`` of ``buf``."""
    count = fields[records.F_HEADER_COUNT]
    offsets = np.zeros(len(count) + 1, dtype=np.int32)
    np.cumsum(count, out=offsets[1:])
    h = records.header_positions(buf, fields)
    keys = _utf8(records.binary_column(buf, h[records.H_KEY_POS], h[records.H_KEY_LEN]))
    if isinstance(keys, int):  # raised outside any handler: no internal error behind it
        i = int(np.searchsorted(offsets, keys, side="right")) - 1
        raise fail(i, "bad header: header key is not UTF-8")
    values = records.binary_column(buf, h[records.H_VALUE_POS], h[records.H_VALUE_LEN])
    child = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(int_array(offsets), child, type=HEADERS_TYPE)


def _timestamps(b: _Batches, rb: I64, delta: I64) -> pa.Array:
    base = np.asarray(b.base_ts, dtype=np.int64)[rb]
    if LOG_APPEND_TIME in b.ts_type:
        log_append = (np.asarray(b.ts_type, dtype=np.int64) == LOG_APPEND_TIME)[rb]
        ms = np.where(log_append, np.asarray(b.max_ts, dtype=np.int64)[rb], base + delta)
    else:
        ms = base + delta
    valid = (ms != NO_TIMESTAMP) & (np.abs(ms) < _TS_LIMIT)
    if valid.all():  # the usual case: no bitmap, no select
        ms *= 1000
        return int_array(ms, kind=TIMESTAMP_TYPE)
    return int_array(np.where(valid, ms, 0) * 1000, valid, TIMESTAMP_TYPE)


def _codecs(b: _Batches, rb: I64) -> pa.Array:
    """The compression column: a slice of a cached constant when every batch has one codec."""
    first = b.codec[0]
    if b.codec.count(first) != len(b.codec):
        return _CODEC_STRINGS.take(int_array(np.asarray(b.codec, dtype=np.int64)[rb]))
    cached = _constant_codecs.get(first)
    if cached is None or len(cached) < len(rb):
        cached = pa.repeat(_CODEC_STRINGS[first], max(len(rb), 1 << 16))
        _constant_codecs[first] = cached
    return cached.slice(0, len(rb))


def _columns(mv: memoryview, b: _Batches) -> pa.RecordBatch:
    buf: Buffer
    if all(c == CODEC_NONE for c in b.codec):  # the records are read where they are
        buf, piece_start = mv, b.area
    else:  # decompressed and raw pieces, one after another
        buf = b"".join(b.pieces)
        piece_start = list(itertools.accumulate((len(x) for x in b.pieces[:-1]), initial=0))
    counts = np.asarray(b.count, dtype=np.int64)
    starts = np.asarray(piece_start, dtype=np.int64)
    ends = starts + np.asarray([len(x) for x in b.pieces], dtype=np.int64)
    w = records.walk(buf, starts, ends, counts)
    if w.status != records.ST_OK:
        raise _problem(w, b)
    f = w.fields
    rb = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    first = np.cumsum([0, *b.count[:-1]]).astype(np.int64)

    def fail(i: int, what: str) -> MessageError:
        k = int(rb[i])
        return CorruptMessageError(f"record {i - int(first[k])} of {b.count[k]}: {what}",
                                   offset=b.position[k])

    offsets = np.asarray(b.base_offset, dtype=np.int64)[rb] + f[records.F_OFFSET]
    codec = _codecs(b, rb)
    headers = (_headers(buf, f, fail) if f[records.F_HEADER_COUNT].any()
               else _no_headers(len(rb)))
    columns = [
        int_array(offsets),
        int_array(offsets + 1),
        int_array((np.arange(len(rb), dtype=np.int64) - first[rb]).astype(np.int32)),
        codec,
        records.binary_column(buf, f[records.F_VALUE_POS], f[records.F_VALUE_LEN]),
        records.binary_column(buf, f[records.F_KEY_POS], f[records.F_KEY_LEN]),
        _timestamps(b, rb, f[records.F_TIMESTAMP]),
        int_array(np.asarray(b.ts_type, dtype=np.int32)[rb]),
        headers,
    ]
    return pa.RecordBatch.from_arrays(columns, schema=LOG_SCHEMA)


def _no_headers(n: int) -> pa.Array:
    """``n`` empty header arrays: a slice of a cached constant."""
    global _empty_headers
    if len(_empty_headers) < n:
        child = pa.StructArray.from_arrays(
            [pa.nulls(0, pa.string()), pa.nulls(0, pa.binary())], fields=list(HEADER_TYPE))
        size = max(n, 1 << 16)
        _empty_headers = pa.ListArray.from_arrays(
            int_array(np.zeros(size + 1, dtype=np.int32)), child, type=HEADERS_TYPE)
    return _empty_headers.slice(0, n)


def decode_batches(
    mv: memoryview, starts: list[int], base: int, *, verify_crc: bool, max_decompressed_size: int
) -> V2Result:
    """The records of the complete record batches at ``starts`` of ``mv`` (``base`` is the
    position of ``mv[0]`` in the file: errors name ``base + start`` of the batch at fault)."""
    b, markers = _read_batches(mv, starts, base, verify_crc, max_decompressed_size)
    if not b.pieces:
        return V2Result(EMPTY_LOG_BATCH, [], markers)
    batch = _columns(mv, b)
    first = np.cumsum([0, *b.count]).tolist()
    txn = [
        TxnBatch(b.position[k], pid, b.base_offset[k], last, first[k], first[k + 1])
        for k, pid, last in b.txn
    ]
    return V2Result(batch, txn, markers)
