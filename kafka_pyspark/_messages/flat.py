"""The decoder's fast lane on the compiled kernel: sets as producers write them, in one pass.

Almost every message set is one of two shapes: plain messages only, or wrappers (gzip or
snappy) that each hold plain messages only. For those, the kernel's ``take`` walks the
messages and copies their payloads into the Arrow value column in the same pass (no record
array in between), and snappy wrappers are decompressed by the kernel straight into the value
column and compacted there in place, all of a fetch in one call (``snappy_fetch``; its CRCs by
ISA-L's C function directly, :data:`_SNAPPY_CRC`), no intermediate bytes. gzip wrappers go
the same way when the optional module ``_gzip`` loads (``_gzip.c``: libdeflate, linked in,
inflates each one into the value column, the kernel's ``take`` compacts it there; a whole fetch
in one call, :data:`gzip_lane`); else they are inflated by :mod:`.compression` (ISA-L), then
taken.

These functions return ``None`` for anything else (a mixed or nested set, a malformed message,
a CRC mismatch, a payload the kernel does not decode, a decompression budget exceeded):
:mod:`.decode` then decodes the same bytes on its general path (:mod:`.walk`), which finds the
same rows and raises the exact error. So this lane never decides an error, and the results
are those of the pure-Python path by construction (the tests compare both on random and
corrupted sets).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._messages import compression, walk
from kafka_pyspark._messages.crc import CRC32_ENGINE, crc32
from kafka_pyspark._messages.layout import CODEC_GZIP
from kafka_pyspark._shared.native import load_kernel
from kafka_pyspark._wire.protocol import INT32_MAX

_BINARY = pa.binary()
WRAPPER = walk.WRAPPER  # the kernel's ST_WRAPPER: take stopped at a compressed message
_scratch = threading.local()

# the gzip lane (``_gzip.c``): only beside the kernel whose walk it runs (KAFKA_PYSPARK_PURE, a
# build without libdeflate, or a stale build leave it out: gzip sets then take the ISA-L path)
gzip_lane = (load_kernel("kafka_pyspark._messages._gzip", lambda m: hasattr(m, "gzip_fetch"),
                         walk.KERNEL_CONSTANTS)
             if walk.kernel is not None else None)
# the snappy lane's CRCs: the kernel's engine (ISA-L's called from C, else ``crc32`` called
# back, one Python call per wrapper)
_SNAPPY_CRC = walk.KERNEL_CRC
# the gzip lane's CRCs: ISA-L's called directly too, else through a call back (faster than
# libdeflate's on large buffers), else libdeflate's own rather than zlib's
_GZIP_CRC: Callable[..., int] | int = (
    walk.CRC_ISAL if _SNAPPY_CRC == walk.CRC_ISAL
    else crc32 if CRC32_ENGINE == "isal" else walk.CRC_LIBDEFLATE)


class Plain(NamedTuple):
    """What :func:`plain` found: the complete plain messages from the start of a buffer."""

    values: pa.Array | None  # None when the walk stopped at a wrapper
    starts: npt.NDArray[np.int64]  # base + position of every message, then of the end
    end: int  # position after the last message taken
    status: int  # walk.END, SHORT or PARTIAL; or WRAPPER (then nothing was taken)
    value: int  # the LENGTH of a PARTIAL message


def _arrays(count: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint32],
                                 npt.NDArray[np.int64]]:
    """Per-thread scratch for ``count`` messages: value ends (count + 1), CRC words, starts
    (count + 1). Reused from call to call: only the ends are copied out."""
    offsets: npt.NDArray[np.int32] | None = getattr(_scratch, "offsets", None)
    if offsets is None or len(offsets) < count + 1:
        size = max(count + 1, 1 << 14)
        _scratch.offsets = offsets = np.empty(size, dtype=np.int32)
        _scratch.words = np.empty(size, dtype=np.uint32)
        _scratch.starts = np.empty(size, dtype=np.int64)
    return offsets, _scratch.words, _scratch.starts


def _values(data_buffer: pa.Buffer, dpos: int, offsets: npt.NDArray[np.int32],
            count: int) -> pa.Array:
    ends = pa.py_buffer(offsets[: count + 1].copy())
    return pa.Array.from_buffers(_BINARY, count, [None, ends, data_buffer.slice(0, dpos)])


class ValueSink:
    """A value column that consecutive :func:`plain` calls append to (``decode_message_set``'s
    ``sink``): each call's values are a zero-copy view of it, so the views of one run of calls
    join into one column without a copy (:func:`join_views`). The caller :meth:`reset` s it
    after handing its views on: the next call starts a fresh buffer of ``nbytes`` bytes plus
    that call's set (never more than that, and ``rows`` rows plus the set's), so memory stays
    bounded by the batch and the fetch. A call that does not fit what is left also starts a
    fresh buffer (its views then join by a copy)."""

    __slots__ = ("buffer", "dpos", "k", "nbytes", "offsets", "rows", "words")

    def __init__(self, nbytes: int, rows: int) -> None:
        self.nbytes = nbytes
        self.rows = rows
        self.buffer: pa.Buffer | None = None
        self.offsets = np.zeros(1, dtype=np.int32)
        self.words = np.empty(0, dtype=np.uint32)
        self.dpos = self.k = 0

    def reset(self) -> None:
        self.buffer = None

    def room(self, nbytes: int, rows: int) -> pa.Buffer:
        """The buffer, with ``nbytes`` (+ 4) bytes and ``rows`` rows left after the end."""
        buffer = self.buffer
        if (buffer is None or buffer.size - self.dpos < nbytes + 4
                or len(self.offsets) - self.k < rows + 1):
            size = self.nbytes + nbytes + 4
            self.buffer = buffer = pa.allocate_buffer(size if size <= INT32_MAX else nbytes + 4)
            self.offsets = np.empty(self.rows + rows + 1, dtype=np.int32)
            if len(self.words) < len(self.offsets):
                self.words = np.empty(len(self.offsets), dtype=np.uint32)
            self.dpos = self.k = 0
        return buffer


class _Target(NamedTuple):
    """Where one call writes values: a fresh buffer (no sink), or the end of a sink's."""

    buffer: pa.Buffer
    offsets: npt.NDArray[np.int32]
    words: npt.NDArray[np.uint32]
    dpos: int
    k: int


def _target(sink: ValueSink | None, nbytes: int, rows: int) -> _Target:
    if sink is None:
        offsets, words, _ = _arrays(rows)
        return _Target(pa.allocate_buffer(nbytes + 4), offsets, words, 0, 0)
    buffer = sink.room(nbytes, rows)
    return _Target(buffer, sink.offsets, sink.words, sink.dpos, sink.k)


def _finish(sink: ValueSink | None, t: _Target, dpos: int, k: int) -> pa.Array:
    """The values written to ``t`` up to ``dpos``, ``k`` (taken into the sink, if any)."""
    if sink is None:
        return _values(t.buffer, dpos, t.offsets, k)
    sink.dpos, sink.k = dpos, k
    # the data buffer ends where these rows end: Arrow's IPC writer (Spark's worker ships
    # batches with it) pads a binary column's data to 64 bytes from the buffer past the rows
    # when it has them, which would send whatever memory (or later rows) lies there
    return pa.Array.from_buffers(_BINARY, k - t.k,
                                 [None, pa.py_buffer(t.offsets), t.buffer.slice(0, dpos)],
                                 offset=t.k)


def join_views(arrays: list[pa.Array]) -> pa.Array | None:
    """``arrays`` (binary) as one column without a copy, when they are consecutive views of
    one :class:`ValueSink` buffer; else None. (Each view's data is the buffer up to its own
    rows' end: the joined column's is the last one's.)"""
    first = arrays[0].buffers()
    at = arrays[0].offset + len(arrays[0])
    for a in arrays[1:]:
        b = a.buffers()
        if a.offset != at or b[1].address != first[1].address or b[2].address != first[2].address:
            return None
        at += len(a)
    data = arrays[-1].buffers()[2]
    return pa.Array.from_buffers(_BINARY, at - arrays[0].offset, [None, first[1], data],
                                 offset=arrays[0].offset)


_NO_ROOM = (np.empty(0, np.uint8), np.zeros(1, np.int32), np.empty(0, np.uint32))


def _wrapper_first(buf: memoryview, base: int, limit: int) -> bool:
    """Whether the first message of ``buf`` is a whole, well-formed wrapper (what ``take``
    stops at, with nothing taken): its header says so and ``take`` agrees, given no room."""
    if len(buf) < 10 or buf[4] != 1 or not buf[5] & 3 or walk.kernel is None:
        return False
    data, offsets, words = _NO_ROOM
    taken, _, status, _, _, _ = walk.kernel.take(buf, 0, len(buf), limit, base, data, 0,
                                                 offsets, words, 0, None)
    return bool(status == WRAPPER and taken == 0)


def plain(buf: memoryview, base: int, stop: int, verify_crc: bool,
          sink: ValueSink | None = None) -> Plain | None:
    """The plain messages of ``buf`` that start before ``stop``, taken by the kernel (a
    :data:`walk.CHECK_CHUNK` at a time, each checked while in cache), into ``sink`` if given."""
    kernel = walk.kernel
    assert kernel is not None
    end = len(buf)
    limit = max(0, min(end, stop))
    _, _, starts = _arrays(limit // walk.MIN_SIZE + 1)
    if _wrapper_first(buf, base, limit):  # no value buffer (nor sink room) for a wrapper set
        return Plain(None, starts[:1].copy(), 0, WRAPPER, buf[5])
    t = _target(sink, end, limit // walk.MIN_SIZE + 1)  # payloads are fewer bytes than the set
    data = np.frombuffer(t.buffer, dtype=np.uint8)
    pos = m = 0
    dpos, k = t.dpos, t.k
    while True:
        taken, pos, status, value, dpos, k1 = kernel.take(
            buf, pos, end, min(limit, pos + walk.CHECK_CHUNK), base, t.buffer, dpos, t.offsets,
            t.words, k, starts[m:])
        if status == WRAPPER and m + taken == 0:
            return Plain(None, starts[:1].copy(), 0, WRAPPER, value)
        if verify_crc and not walk.check_words(data, t.offsets, t.words, k, k1):
            return None
        k, m = k1, m + taken
        if status != walk.END or pos >= limit:
            break
    if status not in (walk.END, walk.SHORT, walk.PARTIAL):
        return None  # a fault, or wrappers after plain messages: the general path
    return Plain(_finish(sink, t, dpos, k), starts[: m + 1].copy(), pos, status, value)


def wrapped(
    buf: memoryview, outer: walk.Scan, verify_crc: bool, max_decompressed: int,
    sink: ValueSink | None = None,
) -> tuple[pa.Array, npt.NDArray[np.int64]] | None:
    """The value column of an outer set of wrappers that hold plain messages only (written
    into ``sink`` if given), and the number of rows of each wrapper."""
    kernel = walk.kernel
    assert kernel is not None
    recs = outer.recs
    if outer.leaves or not len(recs):
        return None
    total = kernel.snappy_total(buf, recs)  # snappy wrappers only: their sizes in one call
    if 0 <= total <= max_decompressed:  # (so each one is within the budget too)
        return _snappy_fetch(buf, recs, total, verify_crc, sink)
    if gzip_lane is not None:  # gzip wrappers only, each one member within the budget
        total = gzip_lane.gzip_total(buf, recs, max_decompressed)
        if 0 <= total <= max_decompressed:
            taken = _gzip_fetch(buf, recs, total, verify_crc, max_decompressed, sink)
            if taken is not None:
                return taken  # else (several deflate blocks, say) the ISA-L path below tries
    fields = list(zip(walk.payload_start(recs).tolist(), walk.payload_size(recs).tolist(),
                      recs["crc"].tolist(), recs["codec"].tolist(), strict=True))
    hints = [_size_hint(buf, start, size, codec, max_decompressed)
             for start, size, _, codec in fields]
    if sum(hints) > max_decompressed:  # a hint is wrong, or a fetch that inflates a lot
        return None
    return _take_wrapped(buf, fields, hints, verify_crc, max_decompressed, sink)


def _snappy_fetch(buf: memoryview, recs: npt.NDArray[Any], total: int, verify_crc: bool,
                  sink: ValueSink | None) -> tuple[pa.Array, npt.NDArray[np.int64]] | None:
    """:func:`wrapped` for snappy wrappers: all of them in one kernel call, which writes from
    position 0 of what it is given: the end of the target, whose offsets then move by its
    ``dpos`` (``offsets[k]``, the end of the rows before, is restored either way)."""
    assert walk.kernel is not None
    t = _target(sink, total, total // walk.MIN_SIZE + 1)
    counts = np.empty(len(recs), dtype=np.int64)
    offsets = t.offsets[t.k :]
    data = np.frombuffer(t.buffer, dtype=np.uint8)[t.dpos :]
    status, _, dpos, k = walk.kernel.snappy_fetch(buf, recs, data, offsets, t.words[t.k :],
                                                  counts, _SNAPPY_CRC, verify_crc)
    offsets[0] = 0
    if status != walk.END:
        offsets[0] = t.dpos
        return None
    offsets[: k + 1] += t.dpos
    return _finish(sink, t, t.dpos + dpos, t.k + k), counts


def _gzip_fetch(buf: memoryview, recs: npt.NDArray[Any], total: int, verify_crc: bool,
                max_decompressed: int, sink: ValueSink | None,
                ) -> tuple[pa.Array, npt.NDArray[np.int64]] | None:
    """:func:`wrapped` for gzip wrappers by :data:`gzip_lane`: all of them in one call, into
    ``total`` bytes of room (the ISIZEs: the lane checks each one against what it inflates)."""
    assert gzip_lane is not None
    t = _target(sink, total, total // walk.MIN_SIZE + 1)
    counts = np.empty(len(recs), dtype=np.int64)
    status, _, dpos, k = gzip_lane.gzip_fetch(buf, recs, t.buffer, t.dpos, t.offsets, t.words,
                                              t.k, counts, verify_crc, max_decompressed,
                                              _GZIP_CRC)
    if status != walk.END:
        return None
    return _finish(sink, t, dpos, k), counts


def _size_hint(buf: memoryview, start: int, size: int, codec: int, limit: int) -> int:
    """What a wrapper payload should decompress to: the size snappy announces, or gzip's ISIZE
    trailer (the last member's size mod 2^32: only a hint, the take checks the room left)."""
    payload = buf[start : start + size]
    if codec == CODEC_GZIP:
        return min(int.from_bytes(payload[-4:], "little"), limit) if size >= 4 else 0
    assert walk.kernel is not None
    announced: int = walk.kernel.snappy_size(payload)
    return announced if announced >= 0 else limit + 1


def _take_wrapped(buf: memoryview, fields: list[tuple[int, int, int, int]], hints: list[int],
                  verify_crc: bool, max_decompressed: int, sink: ValueSink | None,
                  ) -> tuple[pa.Array, npt.NDArray[np.int64]] | None:
    """:func:`wrapped` for gzip (or mixed) wrappers: each one checked, decompressed and taken
    into the value column (``sum(hints)`` bytes of room) at once, while in cache."""
    kernel = walk.kernel
    assert kernel is not None
    total = sum(hints)
    t = _target(sink, total, total // walk.MIN_SIZE + 1)
    data_buffer, offsets, words = t.buffer, t.offsets, t.words
    data = np.frombuffer(data_buffer, dtype=np.uint8)
    dpos, k, checked, room_end = t.dpos, t.k, t.k, t.dpos + total
    counts = np.empty(len(fields), dtype=np.int64)
    for i, (start, size, stored, codec) in enumerate(fields):
        payload = buf[start : start + size]
        if verify_crc and crc32(payload) != stored:
            return None
        before = k
        if codec == CODEC_GZIP:
            inner = compression.gzip_inflate_hinted(payload, hints[i], max_decompressed)
            if inner is None or len(inner) > room_end - dpos:
                return None
            n = len(inner)
            _, _, status, _, dpos, k = kernel.take(inner, 0, n, n, 0, data_buffer, dpos,
                                                   offsets, words, k, None)
        else:
            status, _, dpos, k, _ = kernel.snappy_take(payload, data_buffer, dpos, offsets,
                                                       words, k)
        if status != walk.END:
            return None
        counts[i] = k - before
        if verify_crc and (dpos - int(offsets[checked]) >= walk.CHECK_CHUNK
                           or i == len(fields) - 1):
            if not walk.check_words(data, offsets, words, checked, k):
                return None
            checked = k
    return _finish(sink, t, dpos, k), counts
