"""Reading one piece of a segment file (executor side), in bounded memory.

:func:`iter_split` reads ``[start, end)`` of a file through a ``pyarrow`` input stream,
``buffer_size`` bytes at a time (an entry larger than that is read whole, alone), and yields
Arrow batches of :data:`~kafka_pyspark._formats.LOG_SCHEMA` (0.7 rows are given the same
columns: no key, no timestamp, ``timestamp_type`` -1, no headers), then exactly one
:class:`ReadStop` saying where and why it stopped:

- ``end``: the piece was read to its end;
- ``torn-tail``: the file ends inside an entry, or in zero bytes from there on (a crash while
  appending; Kafka's recovery truncates it): the rows before it are all there, nothing is lost
  that was ever complete;
- ``corrupt``: an entry in the middle is corrupt (CRC, impossible length, magic, codec,
  undecodable payload); every valid row before it has been yielded.

Transactions (``.log`` record batches): rows of aborted transactions are dropped, decided by
the control markers (:mod:`.txn`); control batches never produce rows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from kafka_pyspark._formats import LOG_SCHEMA, LogChunk, decode_log
from kafka_pyspark._formats.batch_layout import NO_TIMESTAMP_TYPE
from kafka_pyspark._messages import decode_message_set
from kafka_pyspark._messages.arrays import bool_array, int_array
from kafka_pyspark._segments.files import SegmentFile
from kafka_pyspark._segments.txn import TxnResolver
from kafka_pyspark._shared import defaults
from kafka_pyspark.errors import MessageError

log = logging.getLogger(__name__)

DEFAULT_BUFFER_SIZE = 8 << 20
ZERO_TAIL_MAX = 16 << 20  # a file ending in at most this many zero bytes has a torn tail

StopKind = Literal["end", "torn-tail", "corrupt"]


@dataclass(frozen=True)
class ReadSettings:
    """How executors read segment files; primitives only."""

    verify_crc: bool = True
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE
    buffer_size: int = DEFAULT_BUFFER_SIZE


@dataclass(frozen=True)
class SegmentSplit:
    """``[start, end)`` (file positions) of ``file``; ``later``: the partition's next files
    (where the commit/abort markers of this piece's transactions may be)."""

    file: SegmentFile
    start: int
    end: int
    later: tuple[SegmentFile, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class ReadStop:
    kind: StopKind
    position: int  # the first byte of the file not read as part of a whole entry
    error: str | None = None
    cause: MessageError | None = None


def _reason(e: MessageError) -> str:
    text = str(e)
    return text.rsplit(" (at offset", 1)[0] if e.offset is not None else text


def _as_log_schema(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A 0.7 decoded batch (``messages.MESSAGE_SCHEMA``) with the later formats' columns."""
    n = batch.num_rows
    return pa.RecordBatch.from_arrays(
        [
            batch.column("offset"),
            batch.column("next_offset"),
            batch.column("inner_index"),
            batch.column("compression"),
            batch.column("value"),
            pa.nulls(n, pa.binary()),
            pa.nulls(n, LOG_SCHEMA.field("timestamp").type),
            int_array(np.full(n, NO_TIMESTAMP_TYPE, dtype=np.int32)),
            pa.nulls(n, LOG_SCHEMA.field("headers").type),
        ],
        schema=LOG_SCHEMA,
    )


class _Piece:
    """Decoding state of one split."""

    def __init__(self, fs: pafs.FileSystem, split: SegmentSplit, settings: ReadSettings) -> None:
        self.fs = fs
        self.split = split
        self.settings = settings
        self.file = split.file
        self.resolver: TxnResolver | None = None
        self.warned: set[int] = set()

    def decode(
        self, buf: memoryview, pos: int, stop: int
    ) -> tuple[pa.RecordBatch, int, int | None]:
        """Rows, bytes consumed and the partial entry's size, for ``buf`` at ``pos``."""
        s = self.settings
        if self.file.kind == "kafka07":
            base = self.file.base_offset
            res = decode_message_set(buf, base + pos, verify_crc=s.verify_crc,
                                     max_decompressed_size=s.max_decompressed_size,
                                     stop_at=base + stop)
            return _as_log_schema(res.batch), res.bytes_consumed, res.partial_size
        chunk = decode_log(buf, pos, verify_crc=s.verify_crc,
                           max_decompressed_size=s.max_decompressed_size, stop_at=stop)
        return self.committed(chunk), chunk.bytes_consumed, chunk.partial_size

    def position_of(self, e: MessageError, pos: int) -> int:
        if e.offset is None:
            return pos
        at = e.offset - self.file.base_offset if self.file.kind == "kafka07" else e.offset
        return max(at, pos)

    def committed(self, chunk: LogChunk) -> pa.RecordBatch:
        if not chunk.txn:
            return chunk.batch
        if self.resolver is None:
            files = (self.file, *self.split.later)
            self.resolver = TxnResolver(self.fs, files, self.split.start)
        keep = np.ones(chunk.batch.num_rows, dtype=bool)
        for t in chunk.txn:
            fate = self.resolver.aborted(t.producer_id, t.last_offset)
            if fate:
                keep[t.row_start : t.row_end] = False
            elif fate is None and t.producer_id not in self.warned:
                self.warned.add(t.producer_id)
                log.warning(
                    "kafka07: segment file %s: transactional batch at byte %d (producer id "
                    "%d, offsets %d..%d) has no commit or abort marker in the files read; "
                    "its rows are returned", self.file.path, t.position, t.producer_id,
                    t.base_offset, t.last_offset)
        return chunk.batch if keep.all() else chunk.batch.filter(bool_array(keep))


def _zeros_to_end(src: pafs.NativeFile, at: int) -> bool:
    """Whether every byte of the file from ``at`` on is zero (up to :data:`ZERO_TAIL_MAX`
    bytes: a longer zero run is not taken for a crash artifact)."""
    size = src.size()
    if size - at > ZERO_TAIL_MAX:
        return False
    data = src.read_at(size - at, at)
    return len(data) == size - at and not data.strip(b"\0")


def iter_split(
    fs: pafs.FileSystem, split: SegmentSplit, settings: ReadSettings
) -> Iterator[pa.RecordBatch | ReadStop]:
    """The rows of ``split`` (entries starting in ``[start, end)``), then one stop.

    One reusable read buffer (the decoders copy what they keep): the bytes of an entry cut off
    at its end move to its front and the next read fills the rest, so no chunk is copied; it
    grows only for an entry larger than it.
    """
    piece = _Piece(fs, split, settings)
    pos, filled, need = split.start, 0, settings.buffer_size
    buf = bytearray(need)
    with fs.open_input_file(split.file.path) as src:
        src.seek(pos)
        while pos < split.end:
            if need > len(buf):
                grown = bytearray(need)
                grown[:filled] = buf[:filled]
                buf = grown
            got = src.readinto(memoryview(buf)[filled:need])
            filled += got
            view = memoryview(buf)[:filled]
            try:
                batch, used, partial = piece.decode(view, pos, split.end)
            except MessageError as e:
                at = piece.position_of(e, pos)
                if at > pos:
                    yield piece.decode(view, pos, at)[0]
                if _zeros_to_end(src, at):
                    yield ReadStop("torn-tail", at, "the file ends in zero bytes (space the "
                                   "filesystem allocated but a crash left unwritten)")
                else:
                    yield ReadStop("corrupt", at, _reason(e), e)
                return
            if batch.num_rows:
                yield batch
            pos += used
            filled -= used
            buf[:filled] = buf[used : used + filled]
            # the total buffer wanted next: the whole cut-off entry when its size is known
            need = max(partial or 0, filled + settings.buffer_size)
            if not got and pos < split.end:
                if filled:
                    yield ReadStop("torn-tail", pos, f"{filled} bytes at the end of the file "
                                   "are not a whole entry (a torn tail)")
                    return
                break
    yield ReadStop("end", pos)
