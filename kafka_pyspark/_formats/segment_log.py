"""``.log`` segment bytes -> Arrow: the walk over entries and the dispatch on MAGIC.

:func:`decode_log` reads the complete entries of a buffer (a chunk of a file); an entry cut
off at the end of the buffer is reported (``partial_size``), not decoded, exactly as
:func:`kafka_pyspark._messages.decode_message_set` does for 0.7 sets. :func:`scan_log` reads
the entry headers only (12 + 5 bytes each), for cutting a file at entry boundaries.
Positions are byte positions in the file: ``base_position`` is the position of ``data[0]``.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._formats.batch_layout import (
    EMPTY_LOG_BATCH,
    ENTRY_HEADER,
    ENTRY_HEADER_SIZE,
    ENTRY_PREFIX_SIZE,
    LAST_OFFSET_DELTA,
    LAST_OFFSET_DELTA_AT,
    MAGIC_POSITION,
    MAGIC_V2,
    MAX_ENTRY_SIZE,
    MIN_BATCH_LENGTH,
    MIN_MESSAGE_SIZE,
)
from kafka_pyspark._formats.legacy import decode_messages
from kafka_pyspark._formats.v2 import Marker, TxnBatch, decode_batches
from kafka_pyspark._shared import defaults
from kafka_pyspark.errors import (
    CorruptMessageError,
    InvalidMessageSizeError,
    UnknownMagicError,
)

_MIN_SIZE = {**MIN_MESSAGE_SIZE, MAGIC_V2: MIN_BATCH_LENGTH}
_SMALLEST = min(_MIN_SIZE.values())
# what parsing code raises on input no check foresaw; translated once, here
_UNFORESEEN = (struct.error, ValueError, IndexError, ArithmeticError, zlib.error,
               pa.ArrowException)


@dataclass(frozen=True)
class LogChunk:
    """What :func:`decode_log` found in one buffer."""

    batch: pa.RecordBatch  # LOG_SCHEMA: user records (control records left out)
    bytes_consumed: int  # bytes of complete entries decoded
    entries: int  # complete entries decoded
    next_offset: int | None  # logical offset after the last entry decoded (None: none)
    partial_size: int | None  # 12 + SIZE of the entry cut off at bytes_consumed, if readable
    txn: list[TxnBatch]  # transactional data batches (row ranges of ``batch``)
    markers: list[Marker]  # commit/abort markers of the control batches, in log order


@dataclass(frozen=True)
class _Walk:
    starts: list[int]
    magics: list[int]
    last_offsets: list[int]
    end: int
    partial_size: int | None


def _walk(mv: memoryview, stop: int, base: int) -> _Walk:
    starts: list[int] = []
    magics: list[int] = []
    lasts: list[int] = []
    pos, size = 0, len(mv)
    partial: int | None = None
    while pos < stop:
        if size - pos < ENTRY_HEADER_SIZE:
            break
        offset, length = ENTRY_HEADER.unpack_from(mv, pos)
        if length < _SMALLEST or length > MAX_ENTRY_SIZE:
            raise InvalidMessageSizeError(f"entry SIZE {length} is impossible", offset=base + pos)
        if size - pos < ENTRY_PREFIX_SIZE or size - pos < ENTRY_HEADER_SIZE + length:
            partial = ENTRY_HEADER_SIZE + length
            break
        magic = mv[pos + MAGIC_POSITION]
        minimum = _MIN_SIZE.get(magic)
        if minimum is None:
            raise UnknownMagicError(f"entry with unknown magic {magic}", offset=base + pos)
        if length < minimum:
            raise InvalidMessageSizeError(f"magic {magic} entry SIZE {length} is below "
                                          f"{minimum}", offset=base + pos)
        starts.append(pos)
        magics.append(magic)
        if magic == MAGIC_V2:
            lasts.append(offset + LAST_OFFSET_DELTA.unpack_from(mv, pos + LAST_OFFSET_DELTA_AT)[0])
        else:
            lasts.append(offset)
        pos += ENTRY_HEADER_SIZE + length
    return _Walk(starts, magics, lasts, pos, partial)


def decode_log(
    data: bytes | bytearray | memoryview,
    base_position: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE,
    stop_at: int | None = None,
) -> LogChunk:
    """Decode the complete entries of ``data``; entries starting at or after the file
    position ``stop_at`` are not decoded. Errors are :class:`MessageError` subclasses whose
    ``offset`` is the file position of the entry at fault."""
    mv = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    stop = len(mv) if stop_at is None else max(0, min(len(mv), stop_at - base_position))
    try:
        walk = _walk(mv, stop, base_position)
        batches, txn, markers = _decode_runs(
            mv, walk, base_position, verify_crc, max_decompressed_size
        )
    except _UNFORESEEN as e:
        raise CorruptMessageError(f"undecodable log entries: {e}", offset=base_position) from e
    batch = batches[0] if len(batches) == 1 else pa.concat_batches(batches)
    return LogChunk(
        batch=batch,
        bytes_consumed=walk.end,
        entries=len(walk.starts),
        next_offset=walk.last_offsets[-1] + 1 if walk.last_offsets else None,
        partial_size=walk.partial_size,
        txn=txn,
        markers=markers,
    )


def _decode_runs(
    mv: memoryview, walk: _Walk, base: int, verify: bool, limit: int
) -> tuple[list[pa.RecordBatch], list[TxnBatch], list[Marker]]:
    batches: list[pa.RecordBatch] = [EMPTY_LOG_BATCH]
    txn: list[TxnBatch] = []
    markers: list[Marker] = []
    rows = 0
    i, n = 0, len(walk.starts)
    while i < n:
        v2 = walk.magics[i] == MAGIC_V2
        j = i
        while j < n and (walk.magics[j] == MAGIC_V2) == v2:
            j += 1
        run = walk.starts[i:j]
        if v2:
            result = decode_batches(mv, run, base, verify_crc=verify, max_decompressed_size=limit)
            batch = result.batch
            txn.extend(TxnBatch(t.position, t.producer_id, t.base_offset, t.last_offset,
                                t.row_start + rows, t.row_end + rows) for t in result.txn)
            markers.extend(result.markers)
        else:
            batch = decode_messages(mv, run, base, verify_crc=verify, max_decompressed_size=limit)
        batches.append(batch)
        rows += batch.num_rows
        i = j
    if len(batches) > 1:
        batches = batches[1:]
    return batches, txn, markers


def scan_log(
    data: bytes | bytearray | memoryview, base_position: int = 0
) -> tuple[npt.NDArray[np.int64], int]:
    """File positions of the complete entries of ``data`` and the position after the last
    (headers only: no CRC check, no decompression)."""
    mv = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    try:
        walk = _walk(mv, len(mv), base_position)
    except _UNFORESEEN as e:
        raise CorruptMessageError(f"unreadable log entries: {e}", offset=base_position) from e
    return np.asarray(walk.starts, dtype=np.int64) + base_position, walk.end + base_position
