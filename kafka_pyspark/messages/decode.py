"""Message sets -> Arrow: :func:`decode_message_set` and :func:`scan_boundaries`.

Layout: :mod:`kafka_pyspark.messages.layout`. How the work is split so that Python does as
little per message as possible:

1. *Walk*: follow the LENGTH fields from message to message (lengths are checked afterwards,
   in bulk). Where two consecutive messages have equal lengths, the rest of that run is
   confirmed with one numpy comparison over a strided int32 view (fixed-size records cost no
   Python per message at all). Many small messages of varied lengths are walked by
   :func:`_speculate` (numpy: candidate starts from the header bytes, then every link of the
   chain confirmed in bulk); anything else by a Python loop, one ``unpack_from`` per message.
2. *Headers* (numpy, per level): MAGIC, ATTRIBUTES, CRC32, payload positions of every message,
   read through a strided record view (evenly spaced messages) or a 10-byte-record gather.
3. *Values* (Arrow/numpy, one copy): the payloads of the uncompressed messages are gathered
   into the Arrow value buffer (a strided ``void`` copy when all messages have one size, else
   an Arrow ``take`` over a zero-copy binary array tiling the buffer as header, payload, ...).
4. *CRC* (one CRC-32 call over that value buffer, see :mod:`.crc`); a mismatch is then
   located message by message so the error names the offset and both CRCs.
5. *Wrappers* (Python per wrapper): CRC, decompression bounded by ``max_decompressed_size``
   into a per-thread scratch buffer (gzip inflated one wrapper at a time; the snappy blocks of
   all wrappers of a level decompressed in one C-level ``map``), then all inner sets of one
   nesting level are decoded together, as one stream, by steps 1-4.

CRC-32 and gzip inflate use python-isal when it imports (:mod:`.crc` probes it once), else
stdlib zlib: the same values either way.

Errors are typed :class:`~kafka_pyspark.errors.MessageError` subclasses carrying the absolute
offset of the outer message at fault (for an inner message, its wrapper's offset). When a set
holds several faults, the one in the earliest outer message is raised; a caller that wants the
good messages before it can decode again with ``stop_at=error.offset``.
"""

from __future__ import annotations

import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark.errors import (
    CorruptMessageError,
    DecompressedSizeError,
    DecompressionError,
    InvalidMessageSizeError,
    MessageError,
    UnknownCodecError,
    UnknownMagicError,
)
from kafka_pyspark.messages import compression
from kafka_pyspark.messages.crc import crc32, verify_concatenated
from kafka_pyspark.messages.layout import (
    CODEC_GZIP,
    CODEC_MASK,
    CODEC_NAMES,
    HEADER_V0_SIZE,
    HEADER_V1_SIZE,
    LENGTH,
    LENGTH_SIZE,
    MAX_MESSAGE_LENGTH,
    MAX_NESTING_DEPTH,
    MESSAGE_SCHEMA,
    MIN_LENGTH,
)

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
Bool = npt.NDArray[np.bool_]

_INT32_MAX = (1 << 31) - 1

# The header fields of a magic-1 message as one numpy record (10 bytes, unaligned)
_HEADER_DTYPE = np.dtype(
    [("length", ">i4"), ("magic", "u1"), ("attributes", "u1"), ("crc", ">u4")]
)
_SLOT_DTYPE = np.dtype((np.void, HEADER_V1_SIZE))  # a 10-byte slot at every byte of a buffer
_HEADER_INDEX = np.arange(HEADER_V1_SIZE, dtype=np.int64)
_CRC_V0_INDEX = np.arange(5, 9, dtype=np.int64)  # a magic-0 CRC32 sits at bytes 5..8

# Walk: the tight loop runs over _WALK_CHUNK bytes at a time; between chunks, when the next two
# messages have equal lengths, the run of that length is confirmed with one numpy comparison
# over a strided int32 view (first over _RUN_PROBE messages, then over all that fit). When a
# chunk held many small messages of different lengths, the rest of the buffer is walked by
# _speculate (a first window, then all the rest; at most _SPEC_TRIES times per walk).
_WALK_CHUNK = 8192
_RUN_MIN = 8
_RUN_PROBE = 16
_SIGN_MASK = 0x7FFFFFFF  # a negative LENGTH becomes huge: the walk jumps past the end
_SPEC_MIN_MESSAGES = 24  # messages in the last chunk (i.e. < ~340 bytes each on average)
_SPEC_MIN_BYTES = 32 << 10  # bytes left to walk
_SPEC_TRIES = 3
_SPEC_WINDOW = 32 << 10  # bytes of the first try (a later one takes all the rest)
_MIN_SIZE = LENGTH_SIZE + MIN_LENGTH  # 9: the smallest message (magic 0, empty payload)

# walk status
_END = 0  # stopped at the end of the buffer or at ``stop``
_SHORT = 1  # fewer than 4 bytes left: the next LENGTH is unreadable
_PARTIAL = 2  # LENGTH readable, the message continues past the buffer
_BAD = 3  # LENGTH out of range

# what parsing code raises on input no check foresaw; translated once, at the API edge
_UNFORESEEN = (
    struct.error, ValueError, IndexError, ArithmeticError, zlib.error, pa.ArrowException,
    *compression.GZIP_ERRORS,
)

_BINARY = pa.binary()
_LARGE_BINARY = pa.large_binary()
_odd_cache: list[pa.Array] = []


def _odd_indices(n: int) -> pa.Array:
    """1, 3, 5, ... (n of them) as an Arrow array: the payload tiles of n messages."""
    cached = _odd_cache[0] if _odd_cache else None
    if cached is None or len(cached) < n:  # (a local: another thread may swap the cache)
        cached = pa.array(np.arange(1, 2 * max(n, 8192), 2, dtype=np.int64))
        _odd_cache[:] = [cached]
    return cached.slice(0, n)


_CODEC_STRINGS = pa.array([CODEC_NAMES[i] for i in range(len(CODEC_NAMES))], pa.string())


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


# --- scratch -------------------------------------------------------------------------------

# The inner sets of one nesting level are decompressed into one buffer, read only until their
# values are copied out. A fresh buffer per call costs a page fault per 4 KiB (as much as the
# copy), so each thread keeps two (levels alternate: level k+1 is built while k is read).
_SCRATCH_KEEP = 64 << 20
_scratch = threading.local()


def _level_buffer(depth: int, size: int) -> U8:
    buffers: list[U8 | None] | None = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = [None, None]
    buf = buffers[depth & 1]
    if buf is None or len(buf) < size:
        if size > _SCRATCH_KEEP:
            return np.empty(size, dtype=np.uint8)
        buf = buffers[depth & 1] = np.empty(max(size, 1 << 20), dtype=np.uint8)
    return buf[:size]


# --- walk ----------------------------------------------------------------------------------


def _walk(
    mv: memoryview, pos: int, end: int, stop: int, check: bool = True
) -> tuple[I64, int, int, int, bool]:
    """Start positions of the complete messages in ``mv[pos:end]`` that start before ``stop``.

    Returns ``(starts, position after the last one, status, LENGTH read at that position,
    whether the starts are evenly spaced)``.
    ``mv`` must not extend past ``end`` (a short read there raises ``struct.error``).

    The inner loop does not check lengths (that costs more than the walk itself): a negative
    LENGTH is masked to a huge one, so the walk always moves forward and ends, and lengths are
    checked afterwards, all at once, from the distances between starts (unless ``check`` is
    false: the inner sets of a level leave that to :meth:`_Level.parse`, once for all).
    """
    chunks: list[I64] = []
    cur: list[int] = []
    app = cur.append
    unpack = LENGTH.unpack_from
    mask = _SIGN_MASK
    limit = min(end, stop)
    short = False
    unchecked = False  # some starts (kept) come from loops that do not check LENGTH
    tries = _SPEC_TRIES
    window = _SPEC_WINDOW
    while pos < limit:
        if end - pos >= 8:  # a run of equal lengths from here?
            (m,) = unpack(mv, pos)
            stride = m + 4
            if MIN_LENGTH <= m <= MAX_MESSAGE_LENGTH and end - pos >= stride + 4 and (
                unpack(mv, pos + stride)[0] == m
            ):
                k = min((end - pos) // stride, (limit - pos + stride - 1) // stride)
                if k >= _RUN_MIN:
                    view = np.ndarray((k,), ">i4", mv, pos, (stride,))
                    probe = min(k, _RUN_PROBE)
                    j = int(np.argmax(view[:probe] != m)) or probe
                    if j == probe < k:
                        j = int(np.argmax(view != m)) or k
                    if cur:
                        chunks.append(np.array(cur, dtype=np.int64))
                        unchecked = True
                        cur = []
                        app = cur.append
                    chunks.append(np.arange(pos, pos + j * stride, stride, dtype=np.int64))
                    pos += j * stride
                    if j >= _RUN_PROBE:
                        continue
                    if pos >= limit:
                        break
        sub = min(limit, pos + _WALK_CHUNK)
        walked = len(cur)
        try:
            while pos < sub:
                app(pos)
                pos += (unpack(mv, pos)[0] & mask) + 4
        except struct.error:
            short = True
            break
        if tries and len(cur) - walked >= _SPEC_MIN_MESSAGES and limit - pos >= _SPEC_MIN_BYTES:
            # many small messages of varied lengths: try the vectorised walk, over a first
            # window, then (if it saw through most of it) over all the rest
            tries -= 1
            stop_at = min(end, pos + window) if window else end
            found = _speculate(mv, pos, stop_at, limit)
            start = pos
            if found is not None:
                chunks.append(np.array(cur, dtype=np.int64))
                cur = []
                app = cur.append
                chunks.append(found)
                unchecked = True
                pos = int(found[-1]) + (unpack(mv, int(found[-1]))[0] & mask) + 4
            if (pos - start) * 4 < (stop_at - start) * 3:
                tries = 0  # payloads with zero bytes: the Python loop does the rest
            window = 0
    status = _END
    m = 0
    if short:  # the last start (always one the tight loop found) has fewer than 4 bytes
        pos = cur.pop()
        status = _SHORT
    elif pos > end:  # the last message does not fit (or its LENGTH is negative or huge)
        pos = cur.pop()
        (m,) = unpack(mv, pos)
        status = _PARTIAL if MIN_LENGTH <= m <= MAX_MESSAGE_LENGTH else _BAD
    if cur:
        chunks.append(np.array(cur, dtype=np.int64))
        unchecked = True
    chunks = [c for c in chunks if len(c)]
    if not chunks:
        return np.zeros(0, dtype=np.int64), pos, status, m, False
    regular = not unchecked and len(chunks) == 1
    starts = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    if check and unchecked:  # LENGTH too small somewhere (or larger than the bound)?
        sizes = np.empty(len(starts), dtype=np.int64)
        np.subtract(starts[1:], starts[:-1], out=sizes[:-1])
        sizes[-1] = pos - int(starts[-1])
        low, high = int(sizes.min()), int(sizes.max())
        if low < MIN_LENGTH + 4 or high > MAX_MESSAGE_LENGTH + 4:
            bad = int(np.argmax((sizes < MIN_LENGTH + 4) | (sizes > MAX_MESSAGE_LENGTH + 4)))
            pos = int(starts[bad])
            starts = starts[:bad]
            (m,) = unpack(mv, pos)
            status = _BAD
            regular = False
    return starts, pos, status, m, regular


def _speculate(mv: memoryview, pos: int, end: int, limit: int) -> I64 | None:
    """The walk from ``pos`` on, without a Python loop: the starts of the complete messages
    in ``mv[pos:end]`` that start before ``limit``, as far as they can be confirmed (or None).

    Every message (of less than 16 MiB) starts with a zero byte (LENGTH's top byte) and has
    0 or 1 four bytes later (MAGIC). The positions where both hold are *candidates*: a superset
    of the message starts when payloads hold no zero bytes (text, JSON), where the only false
    ones are bytes of the header right after a start (LENGTH below 64 KiB or 256, ATTRIBUTES
    0, a CRC32 of 0), dropped by :func:`_first_of_clusters`. Each
    candidate's successor ``c + 4 + LENGTH(c)`` is computed in bulk and the walk confirmed link
    by link: as long as each kept candidate's successor is the next kept one, they are exactly
    the starts the Python loop would visit. The confirmed prefix is returned; the caller walks
    on from its end (payloads with zero bytes end the prefix early, see :func:`_walk`).
    """
    span = end - pos
    if span < 16:
        return None
    a = np.frombuffer(mv, dtype=np.uint8, count=span, offset=pos)
    low = np.flatnonzero(a[4:] <= 1)  # MAGIC-like byte 4 bytes later
    if len(low) > span // 8:
        return None  # payloads full of 0 and 1 bytes
    cand = low[a[low] == 0]  # and a zero byte here (0 <= LENGTH < 16 MiB)
    n = len(cand)
    if n == 0 or cand[0] != 0 or n > span // 16:
        return None
    keep = cand[_first_of_clusters(cand, mv, pos)]
    succ = keep + np.ndarray((span - 3,), ">i4", a, 0, (1,))[keep] + 4
    broken = np.flatnonzero(succ[:-1] != keep[1:])
    count = int(broken[0]) + 1 if len(broken) else len(keep)
    # complete messages (their successor within the buffer) that start before the limit
    count = min(
        count,
        int(np.searchsorted(succ[:count], span, side="right")),
        int(np.searchsorted(keep[:count], limit - pos)),
    )
    if count == 0:
        return None
    found: I64 = keep[:count] + pos
    return found


def _first_of_clusters(cand: I64, mv: memoryview, pos: int) -> Bool:
    """Which candidates (positions in ``mv`` after ``pos``) may be message starts.

    Candidates closer than the smallest message (9 bytes) to the previous candidate form a
    cluster with it: a start and zero bytes of its header. A cluster spanning less than 9
    bytes keeps its first candidate only; in the rare longer ones (an empty message, whose
    header is mostly zero bytes, then the next start) the walk is followed from the first
    candidate, one LENGTH at a time."""
    n = len(cand)
    keep = np.empty(n, dtype=np.bool_)
    keep[0] = True
    np.greater_equal(cand[1:] - cand[:-1], _MIN_SIZE, out=keep[1:])
    heads = np.flatnonzero(keep)
    lasts = np.empty(len(heads), dtype=np.int64)
    lasts[:-1] = heads[1:] - 1
    lasts[-1] = n - 1
    unpack = LENGTH.unpack_from
    for k in np.flatnonzero(cand[lasts] - cand[heads] >= _MIN_SIZE).tolist():
        at = int(cand[heads[k]])
        succ = at + (unpack(mv, pos + at)[0] & _SIGN_MASK) + LENGTH_SIZE
        for i in range(int(heads[k]) + 1, int(lasts[k]) + 1):
            at = int(cand[i])
            if at == succ:
                keep[i] = True
                succ = at + (unpack(mv, pos + at)[0] & _SIGN_MASK) + LENGTH_SIZE
    return keep


def _bad_length_error(length: int, offset: int, where: str = "") -> InvalidMessageSizeError:
    if length < MIN_LENGTH:
        why = f"smaller than the {MIN_LENGTH}-byte minimum (MAGIC + CRC32)"
    else:
        why = f"larger than {MAX_MESSAGE_LENGTH} bytes, which no 0.7 message can be"
    return InvalidMessageSizeError(f"message LENGTH {length}{where} is {why}", offset=offset)


# --- one nesting level ---------------------------------------------------------------------


class _Level:
    """The messages of one nesting level (0: the outer set; k: inside level k-1's wrappers)."""

    def __init__(self, buf: Any, starts: I64, root: I64, parent: I64 | None, depth: int) -> None:
        self.mv = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
        self.arr: U8 = np.frombuffer(self.mv, dtype=np.uint8)
        self.starts = starts
        self.root = root
        self.parent = parent
        self.depth = depth
        self.n = len(starts)
        self.seg_starts: I64 | None = None  # where each inner set starts in the level buffer
        self.values: pa.Array | None = None  # payloads of the uncompressed messages, in order
        empty = np.zeros(0, dtype=np.int64)
        self.lens: I64 = empty  # LENGTH
        self.magic: U8 = np.zeros(0, dtype=np.uint8)
        self.codec: U8 = np.zeros(0, dtype=np.uint8)
        self.crc: U32 = np.zeros(0, dtype=np.uint32)
        self.pstart: I64 = empty  # payload position in the level buffer
        self.plen: I64 = empty  # payload size
        self.leaf: Bool = np.zeros(0, dtype=np.bool_)  # uncompressed (not a wrapper)
        self.uniform_size: int | None = None  # payload size, when every payload has it
        self.regular = False  # starts evenly spaced (known from the walk)
        self.value_ends: npt.NDArray[np.int32] | None = None  # payload ends in the values
        self.all_v1 = False  # every message has magic 1 (known from parse)
        # (outer message, count) of each run of messages with the same outer message, when known
        self.groups: tuple[I64, I64] | None = None

    def truncate(self, n: int) -> None:
        if n < self.n:
            self.n = n
            self.uniform_size = None
            self.starts = self.starts[:n]
            self.root = self.root[:n]
            if self.parent is not None:
                self.parent = self.parent[:n]
            if len(self.lens) > n:  # parsed already
                self.lens = self.lens[:n]
                self.magic = self.magic[:n]
                self.codec = self.codec[:n]
                self.crc = self.crc[:n]
                self.pstart = self.pstart[:n]
                self.plen = self.plen[:n]

    def parse(self) -> int:
        """Read every header; return the index of the first malformed message, or ``n``."""
        n = self.n
        s = self.starts
        size = len(self.arr)
        first, last = int(s[0]), int(s[-1])
        stride = int(s[1]) - first if n > 1 else 0
        head: U8 | None = None
        if n > 1 and last == first + (n - 1) * stride and last + HEADER_V1_SIZE <= size and (
            self.regular or bool((np.diff(s) == stride).all())
        ):  # evenly spaced: one strided record view, no copy
            rec = np.ndarray((n,), _HEADER_DTYPE, self.mv, first, (stride,))
        elif last + HEADER_V1_SIZE <= size:  # gather 10-byte records from overlapping slots
            slots = np.ndarray((size - HEADER_V1_SIZE + 1,), _SLOT_DTYPE, self.mv, 0, (1,))
            rec = slots[s].view(_HEADER_DTYPE)
        else:  # a 9-byte magic-0 message ends the buffer
            head = np.take(self.arr, s[:, None] + _HEADER_INDEX, mode="clip")
            rec = head.view(_HEADER_DTYPE).reshape(n)
        lens = rec["length"].astype(np.int64)
        magic = rec["magic"]
        self.lens = lens
        self.magic = magic
        self.all_v1 = int(magic.min()) == int(magic.max()) == 1
        if self.all_v1:
            codec = (rec["attributes"] & CODEC_MASK).astype(np.uint8, copy=False)
            self.crc = rec["crc"].astype(np.uint32)
            self.codec = codec
            self.pstart = s + HEADER_V1_SIZE
            self.plen = lens - (HEADER_V1_SIZE - LENGTH_SIZE)
            if int(self.plen.min()) >= 0 and int(codec.max()) < 3 and (
                int(lens.max()) <= MAX_MESSAGE_LENGTH
            ):
                return n
        else:
            one = magic == 1
            codec = np.where(one, rec["attributes"] & CODEC_MASK, 0).astype(np.uint8)
            if head is None:
                head = np.take(self.arr, s[:, None] + _CRC_V0_INDEX, mode="clip")
                crc0 = head.view(">u4").reshape(n)
            else:
                crc0 = np.ascontiguousarray(head[:, 5:9]).view(">u4").reshape(n)
            self.crc = np.where(one, rec["crc"], crc0).astype(np.uint32)
            hdr = np.where(one, HEADER_V1_SIZE, HEADER_V0_SIZE)
            self.codec = codec
            self.pstart = s + hdr
            self.plen = lens + LENGTH_SIZE - hdr
        bad = (lens < MIN_LENGTH) | (lens > MAX_MESSAGE_LENGTH) | (magic > 1) | (codec == 3)
        bad |= self.plen < 0
        return int(np.argmax(bad)) if bool(bad.any()) else n

    def header_error(self, i: int, offset: int, where: str) -> MessageError:
        length = int(self.lens[i])
        if not MIN_LENGTH <= length <= MAX_MESSAGE_LENGTH:
            return _bad_length_error(length, offset, where)
        magic = int(self.magic[i])
        if magic > 1:
            return UnknownMagicError(f"unknown message MAGIC {magic}{where}", offset=offset)
        if int(self.plen[i]) < 0:
            return InvalidMessageSizeError(
                f"message LENGTH {int(self.lens[i])}{where} is smaller than the "
                f"{HEADER_V1_SIZE - LENGTH_SIZE}-byte magic-1 header",
                offset=offset,
            )
        return UnknownCodecError(
            f"unknown compression codec {int(self.codec[i])}{where} "
            f"(ATTRIBUTES 0x{int(self.arr[int(self.starts[i]) + 5]):02x})",
            offset=offset,
        )

    def gather(self, leaves: I64 | None) -> tuple[pa.Array, U8]:
        """The payloads of ``leaves`` (all messages if None) as a binary array + its data."""
        if leaves is None:
            n = self.n
            plen = self.plen
            if n and self._uniform():
                size = int(plen[0])
                self.uniform_size = size
                if n * size > _INT32_MAX:
                    raise _too_big()
                if size == 0:
                    offsets = np.zeros(n + 1, dtype=np.int32)
                    data = np.zeros(0, dtype=np.uint8)
                else:
                    offsets = np.arange(0, (n + 1) * size, size, dtype=np.int32)
                    stride = int(self.lens[0]) + LENGTH_SIZE
                    view = np.ndarray((n,), np.dtype((np.void, size)), self.mv,
                                      int(self.pstart[0]), (stride,))
                    data = view.copy().view(np.uint8)
                values = pa.Array.from_buffers(
                    _BINARY, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
                )
                return values, data
            index = _odd_indices(n)
        else:
            n = len(leaves)
            plen = self.plen[leaves]
            index = pa.array(2 * leaves + 1)
        if int(plen.sum()) > _INT32_MAX:
            raise _too_big()
        # zero-copy binary array tiling the buffer: LENGTH..CRC32 of message 0, its payload,
        # header of message 1, ... (messages of a level are back to back); take the payloads
        m = self.n
        end = int(self.starts[-1]) + LENGTH_SIZE + int(self.lens[-1]) if m else 0
        large = end > _INT32_MAX
        tiles = np.empty(2 * m + 1, dtype=np.int64 if large else np.int32)
        tiles[0 : 2 * m : 2] = self.starts
        tiles[1 : 2 * m : 2] = self.pstart
        tiles[2 * m] = end
        tile = pa.Array.from_buffers(
            _LARGE_BINARY if large else _BINARY, 2 * m,
            [None, pa.py_buffer(tiles), pa.py_buffer(self.mv)],
        )
        values = tile.take(index)
        if large:
            values = values.cast(_BINARY)
        buffers = values.buffers()
        offsets = np.frombuffer(buffers[1], dtype=np.int32)[values.offset : values.offset + n + 1]
        lo, hi = int(offsets[0]), int(offsets[-1])
        if hi == lo or buffers[2] is None:
            return values, np.zeros(0, dtype=np.uint8)
        data = np.frombuffer(buffers[2], dtype=np.uint8)[lo:hi]
        if not data.flags.writeable:  # pragma: no cover - Arrow allocates mutable buffers
            data = data.copy()
        self.value_ends = offsets[1:] - lo
        return values, data

    def _uniform(self) -> bool:
        if self.regular and self.all_v1:  # evenly spaced, one header size
            return True
        lens, magic = self.lens, self.magic
        return bool(lens.min() == lens.max()) and bool(magic.min() == magic.max())

    def first_crc_mismatch(self, leaves: I64 | None) -> tuple[int, int] | None:
        """``(index, computed CRC)`` of the first message whose CRC32 is wrong."""
        idx = list(range(self.n)) if leaves is None else leaves.tolist()
        mv = self.mv
        starts, sizes, stored = self.pstart.tolist(), self.plen.tolist(), self.crc.tolist()
        for i in idx:
            actual = crc32(mv[starts[i] : starts[i] + sizes[i]])
            if actual != stored[i]:
                return i, actual
        return None  # pragma: no cover - the aggregate check is exact for single faults


def _too_big() -> MessageError:
    return DecompressedSizeError(
        "the decoded values of one call exceed 2 GiB (one Arrow binary column); "
        "use a smaller fetch size or max.decompressed.size"
    )


class _Decoder:
    """State of one :func:`decode_message_set` call across nesting levels."""

    def __init__(self, base: int, verify_crc: bool, max_decompressed: int) -> None:
        self.base = base
        self.verify_crc = verify_crc
        self.max_decompressed = max_decompressed
        self.err_root: int = 1 << 62  # outer index of the earliest fault found so far
        self.err: MessageError | None = None
        self.used: dict[int, int] = {}  # decompressed bytes per outer wrapper
        self.root_offset: I64 = np.zeros(0, dtype=np.int64)

    def fail(self, root: int, err: MessageError) -> None:
        if root < self.err_root:
            self.err_root = root
            self.err = err

    def offset_of(self, root: int) -> int:
        return int(self.root_offset[root]) if root < len(self.root_offset) else self.base

    def where(self, level: _Level, i: int) -> str:
        if level.depth == 0 or level.seg_starts is None:
            return ""
        pos = int(level.starts[i])
        seg = int(np.searchsorted(level.seg_starts, pos, side="right")) - 1
        return (
            f" (inner message at byte {pos - int(level.seg_starts[seg])} of the message set "
            f"decompressed from the wrapper, nesting depth {level.depth})"
        )

    def cut(self, level: _Level) -> None:
        """Drop messages of outer messages at or after the earliest fault."""
        if level.n and int(level.root[-1]) >= self.err_root:
            level.truncate(int(np.searchsorted(level.root, self.err_root, side="left")))

    def process(self, level: _Level) -> _Level | None:
        """Check one level, gather its values; return the next level (inner sets) if any."""
        self.cut(level)
        if level.n == 0:
            return None
        bad = level.parse()
        if bad < level.n:
            root = int(level.root[bad])
            self.fail(root, level.header_error(bad, self.offset_of(root), self.where(level, bad)))
            self.cut(level)
            if level.n == 0:
                return None
        codec = level.codec
        level.leaf = codec == 0
        if int(codec.max()) == 0:
            leaves: I64 | None = None
            wrappers: list[int] = []
        else:
            leaves = np.flatnonzero(level.leaf)
            wrappers = np.flatnonzero(codec).tolist()
        if leaves is None or len(leaves):
            values, data = level.gather(leaves)
            level.values = values
            if self.verify_crc:
                if leaves is None:
                    ok = verify_concatenated(data, level.plen, level.crc, level.uniform_size,
                                             ends=level.value_ends)
                else:
                    ok = verify_concatenated(data, level.plen[leaves], level.crc[leaves],
                                             ends=level.value_ends)
                if not ok:
                    self.crc_error(level, leaves)
        if not wrappers:
            return None
        return self.decompress(level, wrappers)

    def crc_error(self, level: _Level, among: I64 | None) -> None:
        """Record the CRC error of the first bad message of ``level`` (``among`` these)."""
        found = level.first_crc_mismatch(among)
        if found is None:  # pragma: no cover - the aggregate check is exact for single faults
            root = int(level.root[0])
            message = "CRC32 mismatch in the message set"
        else:
            i, actual = found
            root = int(level.root[i])
            message = (
                f"CRC32 mismatch{self.where(level, i)}: stored "
                f"{int(level.crc[i]):08x}, computed {actual:08x}"
            )
        self.fail(root, CorruptMessageError(message, offset=self.offset_of(root)))

    def decompress(self, level: _Level, wrappers: list[int]) -> _Level | None:
        """CRC-check and decompress ``level``'s wrappers (in order, up to the first fault) into
        one buffer; return the level of the inner sets.

        Two passes: per wrapper (Python), the CRC, the budget and the decompressed size (gzip
        is inflated here, bounded; snappy only has its block headers read); then the level
        buffer is filled, all snappy blocks of the level decompressed in one C-level ``map``.
        """
        mv = level.mv
        index = np.array(wrappers, dtype=np.int64)
        roots = level.root[index].tolist()
        fields = zip(
            wrappers,
            roots,
            self.root_offset[roots].tolist(),
            level.pstart[index].tolist(),
            level.plen[index].tolist(),
            level.crc[index].tolist(),
            level.codec[index].tolist(),
            strict=True,
        )
        verify = self.verify_crc
        used = self.used
        limit = self.max_decompressed
        owners: list[int] = []  # wrapper index of each inner set
        sizes: list[int] = []  # its decompressed size
        gzip_out: list[bytes | None] = []  # gzip: the inflated bytes; snappy: None
        blocks: list[memoryview] = []  # the snappy blocks of all inner sets, in order
        usizes: list[int] = []  # their decompressed sizes
        nblocks: list[int] = []  # snappy blocks per inner set (0 for gzip)
        for w, root, offset, start, size, stored, codec in fields:
            if root >= self.err_root:
                break
            payload = mv[start : start + size]
            if verify:
                actual = crc32(payload)
                if actual != stored:
                    self.fail(
                        root,
                        CorruptMessageError(
                            f"CRC32 mismatch{self.where(level, w)}: stored "
                            f"{stored:08x}, computed {actual:08x}",
                            offset=offset,
                        ),
                    )
                    break
            if level.depth + 1 > MAX_NESTING_DEPTH:
                self.fail(
                    root,
                    DecompressionError(
                        f"compressed messages nested more than {MAX_NESTING_DEPTH} deep",
                        offset=offset,
                    ),
                )
                break
            spent = used.get(root, 0)
            try:
                if codec == CODEC_GZIP:
                    out = compression.gzip_decompress(payload, limit - spent, offset=offset)
                    size = len(out)
                    gzip_out.append(out)
                    nblocks.append(0)
                else:
                    views, block_sizes = compression.snappy_blocks(payload, offset=offset)
                    size = sum(block_sizes)
                    if size > limit - spent:
                        raise DecompressedSizeError(
                            f"snappy wrapper decompresses to more than {limit}"
                            " bytes (max.decompressed.size)",
                            offset=offset,
                        )
                    gzip_out.append(None)
                    nblocks.append(len(views))
                    blocks += views
                    usizes += block_sizes
            except MessageError as e:
                self.fail(root, e)
                break
            used[root] = spent + size
            owners.append(w)
            sizes.append(size)
        if not owners:
            return None
        total = sum(sizes)
        if total > _INT32_MAX:
            raise _too_big()
        buf: Any
        if len(owners) == 1 and gzip_out[0] is not None:
            buf = gzip_out[0]
        else:  # gzip output is copied, snappy blocks decompressed, into the level buffer
            buf = _level_buffer(level.depth + 1, total)
            target = memoryview(buf)
            bulk = all(out is None for out in gzip_out)  # all snappy: every block in one call
            if bulk:
                try:
                    compression.snappy_decompress_into(blocks, usizes, target)
                except MessageError:
                    bulk = False  # redone set by set below, to name the first bad wrapper
            if not bulk:
                done = self.fill(level, owners, sizes, gzip_out, nblocks, blocks, usizes, target)
                owners = owners[:done]
                if not owners:
                    return None
        return self.inner_level(level, buf, owners, sizes[: len(owners)])

    def fill(
        self, level: _Level, owners: list[int], sizes: list[int], gzip_out: list[bytes | None],
        nblocks: list[int], blocks: list[memoryview], usizes: list[int], target: memoryview,
    ) -> int:
        """Fill the level buffer inner set by inner set (gzip output copied, snappy blocks
        decompressed); record the first failure and return how many sets are complete."""
        pos = 0
        first = 0  # index of the inner set's first snappy block
        for k, (w, size, out, count) in enumerate(
            zip(owners, sizes, gzip_out, nblocks, strict=True)
        ):
            if out is not None:
                target[pos : pos + size] = out
            else:
                root = int(level.root[w])
                try:
                    compression.snappy_decompress_into(
                        blocks[first : first + count], usizes[first : first + count],
                        target[pos : pos + size], offset=self.offset_of(root),
                    )
                except MessageError as e:
                    self.fail(root, e)
                    return k
                first += count
            pos += size
        return len(owners)

    def inner_level(self, level: _Level, buf: Any, owners: list[int], sizes: list[int]) -> _Level:
        """The next level: the inner sets (back to back in ``buf``) of ``level``'s wrappers.

        The inner sets are walked as one message stream (runs of equal lengths then span
        wrappers); every inner set must start at a message start and the walk must end
        exactly at the end of the last one, else the first inner set that breaks the chain
        holds garbage or a truncated message.
        """
        mv = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
        bounds = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bounds[1:])
        total = int(bounds[-1])
        starts, stop, status, m, regular = _walk(mv, 0, total, total, check=False)
        # positions the walk went through, then the first inner set boundary it missed
        visited = starts if status != _END else np.append(starts, stop)
        at = np.minimum(np.searchsorted(visited, bounds[1:]), len(visited) - 1)
        missed = np.flatnonzero(visited[at] != bounds[1:]) if len(visited) else np.arange(
            len(sizes)
        )
        if len(missed):
            seg = int(missed[0])  # inner set `seg` does not end where the next one starts
            lo, hi = int(bounds[seg]), int(bounds[seg + 1])
            self.inner_garbage(level, owners[seg], mv, starts, lo, hi, stop, status, m)
            keep = int(np.searchsorted(starts, lo))
            starts = starts[:keep]
            owners, bounds = owners[:seg], bounds[: seg + 1]
        owner_idx = np.array(owners, dtype=np.int64)
        # messages per inner set: its wrapper is the parent of each
        counts = np.diff(np.searchsorted(starts, bounds[1:]), prepend=0)
        parent = np.repeat(owner_idx, counts)
        set_roots = level.root[owner_idx]
        inner = _Level(mv, starts, np.repeat(set_roots, counts), parent, level.depth + 1)
        if level.depth == 0:  # one inner set per outer message: rows group by set
            inner.groups = (set_roots, counts)
        inner.seg_starts = bounds[:-1]
        inner.regular = regular and not len(missed)
        return inner

    def inner_garbage(
        self, level: _Level, w: int, mv: memoryview, starts: I64, lo: int, hi: int,
        stop: int, status: int, m: int,
    ) -> None:
        """Record the error of an inner set ``mv[lo:hi]`` that does not hold whole messages."""
        root = int(level.root[w])
        offset = self.offset_of(root)
        mine = starts[(starts >= lo) & (starts < hi)]
        sizes = np.diff(mine, append=min(stop, hi) if len(mine) else lo)
        small = np.flatnonzero(sizes < MIN_LENGTH + LENGTH_SIZE)
        if len(small):  # a too-small LENGTH sent the walk into garbage
            at = int(mine[small[0]])
            (m,) = LENGTH.unpack_from(mv, at)
            status = _BAD
        elif status == _BAD and lo <= stop < hi:
            at = stop
        else:
            at = int(mine[-1]) if len(mine) else lo
            status = _PARTIAL
        where = f" (byte {at - lo} of the message set decompressed from the wrapper)"
        if status == _BAD:
            self.fail(root, _bad_length_error(m, offset, where))
        else:
            self.fail(
                root,
                CorruptMessageError(
                    "the message set inside a compressed wrapper ends inside a message"
                    f"{where}: trailing garbage or a truncated inner message",
                    offset=offset,
                ),
            )


# --- assembly ------------------------------------------------------------------------------


# Constant columns are slices of cached arrays (immutable, so sharing them is safe)
_constant_cache: dict[Any, pa.Array] = {}


def _constant(key: Any, n: int, build: Any) -> pa.Array:
    cached = _constant_cache.get(key)
    if cached is None or len(cached) < n:
        cached = _constant_cache[key] = build(max(n, 8192))
    return cached.slice(0, n)


def _codec_column(code: int, n: int) -> pa.Array:
    name = CODEC_NAMES[code].encode()

    def build(size: int) -> pa.Array:
        offsets = np.arange(0, (size + 1) * len(name), len(name), dtype=np.int32)
        return pa.Array.from_buffers(
            pa.string(), size, [None, pa.py_buffer(offsets), pa.py_buffer(name * size)]
        )

    return _constant(("codec", code), n, build)


def _zeros_column(n: int) -> pa.Array:
    return _constant("zeros", n, lambda size: pa.array(np.zeros(size, dtype=np.int32)))


def _string_column(codes: npt.NDArray[Any]) -> pa.Array:
    n = len(codes)
    if n and int(codes.min()) == int(codes.max()):
        return _codec_column(int(codes[0]), n)
    return _CODEC_STRINGS.take(pa.array(codes.astype(np.int32)))


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array([], field.type) for field in MESSAGE_SCHEMA], schema=MESSAGE_SCHEMA
    )


def _rank_in_group(keys: I64) -> I64:
    """For sorted ``keys``: each element's position among the elements with the same key."""
    n = len(keys)
    index = np.arange(n, dtype=np.int64)
    if n == 0:
        return index
    first = np.zeros(n, dtype=np.int64)
    change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    first[change] = change
    return index - np.maximum.accumulate(first)


def _assemble(levels: list[_Level], outer: _Level, base: int) -> pa.RecordBatch:
    levels = [lv for lv in levels if lv.n or lv is outer]
    if outer.n == 0:
        return _empty_batch()
    root_offset = base + outer.starts
    root_next = root_offset + LENGTH_SIZE + outer.lens
    root_codec = outer.codec
    if len(levels) == 1 and outer.values is not None and len(outer.values) == outer.n:
        values = outer.values
        assert values is not None
        arrays = [
            pa.array(root_offset),
            pa.array(root_next),
            _zeros_column(outer.n),
            _codec_column(0, outer.n),
            values,
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)
    if outer.n and int(root_codec.min()) == int(root_codec.max()):
        codec_col: Any = int(root_codec[0])  # every row has this codec
    else:
        codec_col = None
    holders = [lv for lv in levels if lv.values is not None and len(lv.values)]
    if len(holders) == 1 and holders[0].values is not None and (
        len(holders[0].values) == holders[0].n
    ):
        # all rows are the messages of one level, in its order (wrappers nest in order)
        lv = holders[0]
        row_root = lv.root
        if lv.groups is not None and int(lv.groups[1].sum()) == lv.n:
            roots, per_root = lv.groups  # per outer message: repeat, no per-row lookups
            row_offset = np.repeat(root_offset[roots], per_root)
            row_next = np.repeat(root_next[roots], per_root)
            first_row = (np.cumsum(per_root) - per_root).astype(np.int32)
            inner_index = np.arange(lv.n, dtype=np.int32) - np.repeat(first_row, per_root)
        else:
            row_offset = root_offset[row_root]
            row_next = root_next[row_root]
            inner_index = _rank_in_group(row_root).astype(np.int32)
        arrays = [
            pa.array(row_offset),
            pa.array(row_next),
            pa.array(inner_index),
            _codec_column(codec_col, lv.n) if codec_col is not None else (
                _string_column(root_codec[row_root])
            ),
            lv.values,
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)
    # leaves under every message, bottom-up; then the row of each leaf, top-down
    depth = len(levels)
    counts: list[I64] = [np.zeros(0, dtype=np.int64)] * depth
    for k in range(depth - 1, -1, -1):
        lv = levels[k]
        c = lv.leaf.astype(np.int64)
        if k + 1 < depth:
            child = levels[k + 1]
            assert child.parent is not None
            c = c + np.bincount(child.parent, weights=counts[k + 1], minlength=lv.n).astype(
                np.int64
            )
        counts[k] = c
    rows: list[I64] = [np.cumsum(counts[0]) - counts[0]]
    for k in range(1, depth):
        lv = levels[k]
        assert lv.parent is not None
        before = np.cumsum(counts[k]) - counts[k]
        rank = _rank_in_group(lv.parent)
        rows.append(rows[k - 1][lv.parent] + before - before[np.arange(lv.n) - rank])
    total = int(counts[0].sum())
    parts: list[tuple[I64, I64, pa.Array]] = []
    for k, lv in enumerate(levels):
        if lv.values is None or len(lv.values) == 0:
            continue
        leaves = np.flatnonzero(lv.leaf)
        parts.append((rows[k][leaves], lv.root[leaves], lv.values))
    if len(parts) == 1:
        row_root = parts[0][1]
        value_col = parts[0][2]
    elif not parts:
        row_root = np.zeros(0, dtype=np.int64)
        value_col = pa.array([], pa.binary())
    else:
        all_rows = np.concatenate([p[0] for p in parts])
        row_root = np.empty(total, dtype=np.int64)
        row_root[all_rows] = np.concatenate([p[1] for p in parts])
        perm = np.empty(total, dtype=np.int64)
        perm[all_rows] = np.arange(total, dtype=np.int64)
        value_col = pa.concat_arrays([p[2] for p in parts]).take(pa.array(perm))
    inner_index = (np.arange(len(row_root), dtype=np.int64) - rows[0][row_root]).astype(np.int32)
    arrays = [
        pa.array(root_offset[row_root]),
        pa.array(root_next[row_root]),
        pa.array(inner_index),
        _string_column(root_codec[row_root]),
        value_col,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=MESSAGE_SCHEMA)


# --- public API ----------------------------------------------------------------------------


def _as_bytes_view(data: bytes | bytearray | memoryview) -> memoryview:
    mv = memoryview(data)
    return mv if mv.format == "B" and mv.ndim == 1 else mv.cast("B")


def decode_message_set(
    data: bytes | bytearray | memoryview,
    base_offset: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = 64 << 20,
    stop_at: int | None = None,
) -> DecodeResult:
    """Decode the complete messages of a message set (e.g. a FETCH answer) into Arrow.

    ``base_offset`` is the log offset of ``data[0]``. Messages inside compressed wrappers are
    flattened in order: each gets its wrapper's ``offset``/``next_offset``, an ``inner_index``
    0..n-1 and the wrapper's codec name. A message cut off at the end of ``data`` is normal
    (FETCH truncates): it is reported through ``next_offset`` and ``partial_size``. Outer
    messages starting at or after the absolute offset ``stop_at`` are not decoded.

    ``max_decompressed_size`` bounds the bytes one outer wrapper may decompress to (all its
    nesting levels together). Raises a :class:`~kafka_pyspark.errors.MessageError` subclass
    for a corrupt, hostile or unsupported set, with the offset of the outer message at fault.
    """
    if base_offset < 0:
        raise ValueError(f"base_offset must be >= 0, got {base_offset}")
    if max_decompressed_size < 0:
        raise ValueError(f"max_decompressed_size must be >= 0, got {max_decompressed_size}")
    mv = _as_bytes_view(data)
    size = len(mv)
    stop = size if stop_at is None else max(0, min(size, stop_at - base_offset))
    try:
        return _decode(mv, base_offset, stop, verify_crc, max_decompressed_size)
    except _UNFORESEEN as e:
        # only reached through a bug or an input no check above foresaw; still a typed error
        raise CorruptMessageError(f"undecodable message set: {e}", offset=base_offset) from e


def _decode(mv: memoryview, base: int, stop: int, verify: bool, max_dec: int) -> DecodeResult:
    size = len(mv)
    starts, end, status, m, regular = _walk(mv, 0, size, stop)
    partial_size: int | None = None
    decoder = _Decoder(base, verify, max_dec)
    n = len(starts)
    decoder.root_offset = base + starts
    if status == _BAD:
        decoder.fail(n, _bad_length_error(m, base + end))
    elif status == _PARTIAL:
        partial_size = LENGTH_SIZE + m
    outer = _Level(mv, starts, np.arange(n, dtype=np.int64), None, 0)
    outer.regular = regular
    levels = [outer]
    level: _Level | None = outer
    while level is not None:
        level = decoder.process(level)
        if level is not None:
            levels.append(level)
    if decoder.err is not None:
        raise decoder.err
    batch = _assemble(levels, outer, base)
    return DecodeResult(
        batch=batch,
        next_offset=base + end,
        bytes_consumed=end,
        message_count=n,
        partial_size=partial_size,
    )


def scan_boundaries(data: bytes | bytearray | memoryview, base_offset: int = 0) -> tuple[I64, int]:
    """Absolute start offsets of the complete outer messages, and the offset after the last.

    Reads headers only (no CRC check, no decompression): for cutting a range at message
    boundaries. An impossible LENGTH, MAGIC or codec raises a typed error as in decoding.
    """
    if base_offset < 0:
        raise ValueError(f"base_offset must be >= 0, got {base_offset}")
    mv = _as_bytes_view(data)
    try:
        starts, end, status, m, _ = _walk(mv, 0, len(mv), len(mv))
        if status == _BAD:
            raise _bad_length_error(m, base_offset + end)
        level = _Level(mv, starts, np.arange(len(starts), dtype=np.int64), None, 0)
        if level.n:
            bad = level.parse()
            if bad < level.n:
                raise level.header_error(bad, base_offset + int(starts[bad]), "")
    except _UNFORESEEN as e:
        raise CorruptMessageError(f"unreadable message set: {e}", offset=base_offset) from e
    return base_offset + starts, base_offset + end
