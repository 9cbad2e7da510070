"""Message sets -> Arrow: :func:`decode_message_set` and :func:`scan_boundaries`.

Layout: :mod:`kafka_pyspark._messages.layout`. The per-message work (the LENGTH walk, header
checks, payload copies, CRC checks) is :mod:`.walk`'s, by the compiled kernel or its
pure-Python twin. This module decides what to do with what it finds:

1. the outer set is scanned up to ``stop_at`` and up to its first incomplete or malformed
   message;
2. messages are taken in order: a run of uncompressed messages becomes a *piece* of rows; a
   wrapper (gzip or snappy) has its CRC checked, is decompressed (bounded by
   ``max_decompressed_size`` per outer message, all nesting levels together) and its inner set
   is scanned and taken the same way, depth first, so rows come out in log order;
3. the payloads of all pieces are copied once into the Arrow value column, and all their
   CRC-32s are checked with one CRC call over it (:func:`.walk.gather`);
4. the other columns come from the outer message each row belongs to.

Errors are typed :class:`~kafka_pyspark.errors.MessageError` subclasses carrying the absolute
offset of the outer message at fault (for an inner message, its wrapper's offset). When a set
holds several faults, the one in the earliest outer message is raised; a caller that wants the
good messages before it can decode again with ``stop_at=error.offset``. Decompressed inner
sets live in a per-thread scratch arena only until their payloads are copied out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._messages import columns, compression, flat, walk
from kafka_pyspark._messages.crc import crc32
from kafka_pyspark._messages.layout import (
    CODEC_GZIP,
    HEADER_V1_SIZE,
    LENGTH_SIZE,
    MAX_MESSAGE_LENGTH,
    MAX_NESTING_DEPTH,
    MIN_LENGTH,
)
from kafka_pyspark._messages.walk import Piece, Scan
from kafka_pyspark._shared import defaults
from kafka_pyspark._wire.protocol import INT64_MAX
from kafka_pyspark.errors import (
    CorruptMessageError,
    DecompressedSizeError,
    DecompressionError,
    InvalidMessageSizeError,
    MessageError,
    UnknownCodecError,
    UnknownMagicError,
)

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class DecodeResult:
    """What :func:`decode_message_set` found in one buffer."""

    batch: pa.RecordBatch  # MESSAGE_SCHEMA, one row per (inner) message
    next_offset: int  # base_offset + bytes of complete outer messages consumed
    bytes_consumed: int  # next_offset - base_offset
    message_count: int  # complete OUTER messages decoded
    partial_size: int | None  # size (4 + LENGTH) of the incomplete message at next_offset,
    # if its LENGTH was readable; bytes_consumed == 0 and partial_size > len(data) means the
    # first message is larger than the buffer: fetch again with a larger size


# --- errors --------------------------------------------------------------------------------


class _Fault(Exception):
    """The first fault found, in outer message ``root``: stops the walk."""

    def __init__(self, root: int, error: MessageError) -> None:
        super().__init__(str(error))
        self.root = root
        self.error = error


def _bad_length_error(length: int, offset: int, where: str = "") -> InvalidMessageSizeError:
    if length < MIN_LENGTH:
        why = f"smaller than the {MIN_LENGTH}-byte minimum (MAGIC + CRC32)"
    else:
        why = f"larger than {MAX_MESSAGE_LENGTH} bytes, which no 0.7 message can be"
    return InvalidMessageSizeError(f"message LENGTH {length}{where} is {why}", offset=offset)


def _status_error(status: int, value: int, offset: int, where: str = "") -> MessageError:
    """The error for a scan that stopped at a malformed message (``walk.BAD_*``)."""
    if status == walk.BAD_LENGTH:
        return _bad_length_error(value, offset, where)
    if status == walk.BAD_MAGIC:
        return UnknownMagicError(f"unknown message MAGIC {value}{where}", offset=offset)
    if status == walk.SHORT_V1:
        return InvalidMessageSizeError(
            f"message LENGTH {value}{where} is smaller than the "
            f"{HEADER_V1_SIZE - LENGTH_SIZE}-byte magic-1 header",
            offset=offset,
        )
    if status == walk.BAD_CODEC:
        return UnknownCodecError(
            f"unknown compression codec {value & 3}{where} (ATTRIBUTES 0x{value:02x})",
            offset=offset,
        )
    return CorruptMessageError(  # SHORT, PARTIAL: an inner set ends inside a message
        "the message set inside a compressed wrapper ends inside a message"
        f"{where}: trailing garbage or a truncated inner message",
        offset=offset,
    )


def _inner_where(pos: int, depth: int) -> str:
    return (
        f" (inner message at byte {pos} of the message set decompressed from the wrapper, "
        f"nesting depth {depth})"
    )


# --- scratch -------------------------------------------------------------------------------

# Decompressed snappy sets are written into a per-thread arena, reset by every call (their
# payloads are copied out before the call returns). A fresh buffer per wrapper would cost a
# page fault per 4 KiB, as much as the copy.
_ARENA_CHUNK = 4 << 20
_ARENA_KEEP = 64 << 20
_arena = threading.local()


def _arena_reset() -> None:
    _arena.used = 0


def _arena_take(size: int) -> memoryview:
    chunk: npt.NDArray[np.uint8] | None = getattr(_arena, "chunk", None)
    used: int = getattr(_arena, "used", 0)
    if chunk is None or len(chunk) - used < size:
        fresh = np.empty(max(size, _ARENA_CHUNK), dtype=np.uint8)
        if len(fresh) <= _ARENA_KEEP:
            _arena.chunk = chunk = fresh
            _arena.used = used = 0
        else:  # too big to keep: used once
            return memoryview(fresh.data)[:size]
    _arena.used = used + size
    return memoryview(chunk.data)[used : used + size]


# --- the walk over nesting levels ----------------------------------------------------------


class _Decoder:
    """One :func:`decode_message_set` call: the pieces of rows found so far, in order."""

    def __init__(self, base: int, verify_crc: bool, max_decompressed: int, outer: Scan) -> None:
        self.base = base
        self.verify_crc = verify_crc
        self.max_decompressed = max_decompressed
        self.outer = outer
        self.pieces: list[Piece] = []
        self.piece_root: list[int] = []  # outer message of an inner piece; -1: outer piece
        self.piece_depth: list[int] = []
        self.piece_rows: list[int] = []  # rows of an inner piece
        self.used: dict[int, int] = {}  # decompressed bytes per outer wrapper
        self._starts: list[int] | None = None

    def offset_of(self, root: int) -> int:
        if self._starts is None:
            self._starts = self.outer.recs["start"].tolist()
        return self.base + self._starts[root]

    def add(self, scan: Scan, lo: int, hi: int, root: int, depth: int) -> None:
        self.pieces.append(Piece(scan, lo, hi))
        self.piece_root.append(root)
        self.piece_depth.append(depth)
        self.piece_rows.append(walk.leaf_count(scan, lo, hi) if root >= 0 else 0)

    def take(self, scan: Scan, root: int, depth: int) -> None:
        """Take the messages of ``scan`` in order (``root`` -1: the outer set)."""
        n = len(scan.recs)
        if scan.leaves == n:
            if n:
                self.add(scan, 0, n, root, depth)
            return
        recs = scan.recs
        wrappers = np.flatnonzero(recs["codec"])
        index = wrappers.tolist()
        fields = zip(
            index,
            walk.payload_start(recs[wrappers]).tolist(),
            walk.payload_size(recs[wrappers]).tolist(),
            recs["crc"][wrappers].tolist(),
            recs["codec"][wrappers].tolist(),
            strict=True,
        )
        prev = 0
        for w, start, size, stored, codec in fields:
            if w > prev:
                self.add(scan, prev, w, root, depth)
            r = w if root < 0 else root
            where = "" if depth == 0 else _inner_where(int(recs["start"][w]), depth)
            inner = self.unwrap(scan.buf[start : start + size], stored, codec, r, depth, where)
            self.take_inner(inner, r, depth + 1)
            prev = w + 1
        if prev < n:
            self.add(scan, prev, n, root, depth)

    def unwrap(
        self, payload: memoryview, stored: int, codec: int, root: int, depth: int, where: str
    ) -> memoryview:
        """CRC-check and decompress one wrapper's payload (within the root's budget)."""
        offset = self.offset_of(root)
        if self.verify_crc:
            actual = crc32(payload)
            if actual != stored:
                raise _Fault(root, CorruptMessageError(
                    f"CRC32 mismatch{where}: stored {stored:08x}, computed {actual:08x}",
                    offset=offset,
                ))
        if depth + 1 > MAX_NESTING_DEPTH:
            raise _Fault(root, DecompressionError(
                f"compressed messages nested more than {MAX_NESTING_DEPTH} deep", offset=offset
            ))
        spent = self.used.get(root, 0)
        budget = self.max_decompressed - spent
        try:
            if codec == CODEC_GZIP:
                inner = memoryview(compression.gzip_decompress(payload, budget, offset=offset))
            else:
                blocks, sizes = compression.snappy_blocks(payload, offset=offset)
                total = sum(sizes)
                if total > budget:
                    raise DecompressedSizeError(
                        f"snappy wrapper decompresses to more than {self.max_decompressed}"
                        " bytes (max.decompressed.size)",
                        offset=offset,
                    )
                inner = _arena_take(total)
                compression.snappy_decompress_into(blocks, sizes, inner, offset=offset)
        except MessageError as e:
            raise _Fault(root, e) from None
        self.used[root] = spent + len(inner)
        return inner

    def take_inner(self, buf: memoryview, root: int, depth: int) -> None:
        """An inner set: whole messages only, to its last byte."""
        scan = walk.scan(buf, 0, len(buf), len(buf))
        if scan.status != walk.END:
            if scan.status in (walk.SHORT, walk.PARTIAL):
                where = f" (byte {scan.end} of the message set decompressed from the wrapper)"
            else:
                where = _inner_where(scan.end, depth)
            raise _Fault(root, _status_error(scan.status, scan.value, self.offset_of(root),
                                             where))
        self.take(scan, root, depth)

    def crc_error(self, bad: walk.Bad) -> _Fault:
        i, k, actual = bad
        piece = self.pieces[i]
        rec = piece.scan.recs[k]
        root = self.piece_root[i]
        depth = self.piece_depth[i]
        if root < 0:
            root, where = k, ""
        else:
            where = _inner_where(int(rec["start"]), depth)
        return _Fault(root, CorruptMessageError(
            f"CRC32 mismatch{where}: stored {int(rec['crc']):08x}, computed {actual:08x}",
            offset=self.offset_of(root),
        ))

    def row_roots(self) -> I64 | None:
        """The outer message of every row (None when row i is outer message i)."""
        if len(self.pieces) == 1 and self.piece_root[0] < 0 and (
            self.outer.leaves == len(self.outer.recs)
        ):
            return None
        parts: list[I64] = []
        roots: list[int] = []  # a run of inner pieces: their outer messages and rows
        rows: list[int] = []
        for piece, root, count in zip(self.pieces, self.piece_root, self.piece_rows,
                                      strict=True):
            if root >= 0:
                roots.append(root)
                rows.append(count)
                continue
            if roots:
                parts.append(np.repeat(np.array(roots, dtype=np.int64), rows))
                roots, rows = [], []
            codec = piece.scan.recs["codec"][piece.lo : piece.hi]
            parts.append(np.flatnonzero(codec == 0) + piece.lo)
        if roots:
            parts.append(np.repeat(np.array(roots, dtype=np.int64), rows))
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


# --- public API ----------------------------------------------------------------------------


def _as_bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    mv = memoryview(data)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def decode_message_set(
    data: bytes | bytearray | memoryview,
    base_offset: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE,
    stop_at: int | None = None,
    sink: flat.ValueSink | None = None,
) -> DecodeResult:
    """Decode the complete messages of a message set (e.g. a FETCH answer) into Arrow.

    ``base_offset`` is the log offset of ``data[0]``. Messages inside compressed wrappers are
    flattened in order: each gets its wrapper's ``offset``/``next_offset``, an ``inner_index``
    0..n-1 and the wrapper's codec name. A message cut off at the end of ``data`` is normal
    (FETCH truncates): it is reported through ``next_offset`` and ``partial_size``. Outer
    messages starting at or after the absolute offset ``stop_at`` are not decoded.

    ``max_decompressed_size`` bounds the bytes one outer wrapper may decompress to (all its
    nesting levels together). ``sink``: where the compiled fast lane writes the values (a
    :class:`.flat.ValueSink`, so that the batches of consecutive fetches join without a copy;
    the batch is the same). Raises a :class:`~kafka_pyspark.errors.MessageError` subclass
    for a corrupt, hostile or unsupported set, with the offset of the outer message at fault.
    """
    if max_decompressed_size < 0:
        raise ValueError(f"max_decompressed_size must be >= 0, got {max_decompressed_size}")
    mv = _as_bytes_view(data)
    _check_base(base_offset, len(mv))
    size = len(mv)
    stop = size if stop_at is None else max(0, min(size, stop_at - base_offset))
    if walk.kernel is not None:
        fast = _decode_flat(mv, base_offset, stop, verify_crc, max_decompressed_size, sink)
        if fast is not None:
            return fast
    outer = walk.scan(mv, 0, size, stop)
    n = len(outer.recs)
    fault: _Fault | None = None
    if outer.status not in (walk.END, walk.SHORT, walk.PARTIAL):
        fault = _Fault(n, _status_error(outer.status, outer.value, base_offset + outer.end))
    decoder = _Decoder(base_offset, verify_crc, max_decompressed_size, outer)
    _arena_reset()
    try:
        decoder.take(outer, -1, 0)
    except _Fault as f:
        fault = f  # in an earlier outer message than a fault the scan stopped at
    values, bad = walk.gather(decoder.pieces, verify_crc)
    if bad is not None:
        crc_fault = decoder.crc_error(bad)
        if fault is None or crc_fault.root < fault.root:
            fault = crc_fault
    if fault is not None:
        raise fault.error
    partial = LENGTH_SIZE + outer.value if outer.status == walk.PARTIAL else None
    return DecodeResult(
        batch=columns.batch(outer.recs, decoder.row_roots(), values, base_offset),
        next_offset=base_offset + outer.end,
        bytes_consumed=outer.end,
        message_count=n,
        partial_size=partial,
    )


def _decode_flat(
    mv: memoryview, base: int, stop: int, verify_crc: bool, max_decompressed: int,
    sink: flat.ValueSink | None,
) -> DecodeResult | None:
    """:func:`decode_message_set` by :mod:`.flat`'s fast lane; None: the general path decides."""
    taken = flat.plain(mv, base, stop, verify_crc, sink)
    if taken is None:
        return None
    if taken.values is not None:  # plain messages only
        n = len(taken.starts) - 1
        return DecodeResult(
            batch=columns.plain_batch(taken.starts, taken.values),
            next_offset=base + taken.end,
            bytes_consumed=taken.end,
            message_count=n,
            partial_size=LENGTH_SIZE + taken.value if taken.status == walk.PARTIAL else None,
        )
    outer = walk.scan(mv, 0, len(mv), stop)  # wrappers first
    if outer.status not in (walk.END, walk.SHORT, walk.PARTIAL):
        return None
    wrapped = flat.wrapped(mv, outer, verify_crc, max_decompressed, sink)
    if wrapped is None:
        return None
    values, counts = wrapped
    return DecodeResult(
        batch=columns.wrapped_batch(outer.recs, counts, values, base),
        next_offset=base + outer.end,
        bytes_consumed=outer.end,
        message_count=len(outer.recs),
        partial_size=LENGTH_SIZE + outer.value if outer.status == walk.PARTIAL else None,
    )


def _check_base(base_offset: int, size: int) -> None:
    """Offsets base_offset .. base_offset + size must be int64 (0.7's offsets; the kernel adds
    positions to the base in int64)."""
    if not 0 <= base_offset <= INT64_MAX - size:
        raise ValueError(f"base_offset must be >= 0 with base_offset + {size} bytes within "
                         f"int64, got {base_offset}")


def scan_boundaries(data: bytes | bytearray | memoryview, base_offset: int = 0) -> tuple[I64, int]:
    """Absolute start offsets of the complete outer messages, and the offset after the last.

    Reads headers only (no CRC check, no decompression): for cutting a range at message
    boundaries. An impossible LENGTH, MAGIC or codec raises a typed error as in decoding.
    """
    mv = _as_bytes_view(data)
    _check_base(base_offset, len(mv))
    outer = walk.scan(mv, 0, len(mv), len(mv))
    if outer.status not in (walk.END, walk.SHORT, walk.PARTIAL):
        raise _status_error(outer.status, outer.value, base_offset + outer.end)
    return base_offset + outer.recs["start"], base_offset + outer.end



