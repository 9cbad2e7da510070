"""The per-message work of decoding: the LENGTH walk, header checks, payload gathering and
CRC checks, by the compiled kernel (``_kernel.c``) or by its pure-Python twin (same results).

:func:`scan` follows LENGTH from message to message in one buffer and reads every header into
a record array (:data:`RECORD`), stopping at the first message that is incomplete or
malformed; :func:`gather` copies the payloads of the uncompressed messages of several
scanned stretches (possibly of several buffers) into one Arrow binary column and checks all
their CRC-32s at once (one CRC call over the column's data, see :mod:`.crc`).

Which engine runs: the compiled kernel when it imports (``make setup`` builds it; a wheel
without it, or one built where no compiler was found, runs the pure path), unless the
environment variable ``KAFKA_PYSPARK_PURE`` is set to a non-empty value other than ``0``
(read once, at import; :mod:`kafka_pyspark._shared.native` loads both kernels). :data:`ENGINE`
names the one in use. Both raise nothing on bad data:
a problem in the input is a ``status`` of the scan, turned into a typed error by the caller.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._messages.arrays import int_array
from kafka_pyspark._messages.crc import crc32, isal_crc_address, isal_zlib, verify_concatenated
from kafka_pyspark._messages.layout import (
    CODEC_MASK,
    CODEC_NAMES,
    CODEC_SNAPPY,
    HEADER_V0_SIZE,
    HEADER_V1_SIZE,
    LENGTH,
    LENGTH_SIZE,
    MAX_MESSAGE_LENGTH,
    MIN_LENGTH,
    MIN_LENGTH_V1,
)
from kafka_pyspark._shared.native import load_kernel
from kafka_pyspark._wire.protocol import INT32_MAX

# scan status (the kernel's ``ST_*``)
END = 0  # reached min(end, stop)
SHORT = 1  # fewer than 4 bytes left: the next LENGTH is unreadable
PARTIAL = 2  # LENGTH (value) readable, the message continues past the end
BAD_LENGTH = 3  # LENGTH (value) out of range
BAD_MAGIC = 4  # MAGIC (value) is neither 0 nor 1
BAD_CODEC = 5  # ATTRIBUTES (value) name codec 3
SHORT_V1 = 6  # magic 1 with LENGTH (value) below its 6-byte header
WRAPPER = 7  # take only (_messages/flat.py): a compressed message, ATTRIBUTES in value
# statuses of the fast lane's kernel calls only (_messages/flat.py), which then steps aside
FULL = 8  # take: an output buffer is full
BAD_SNAPPY = 9  # snappy_fetch: not a snappy payload the kernel decodes
BAD_CRC = 10  # snappy_fetch, gzip_fetch: a CRC32 does not match
BAD_GZIP = 11  # gzip_fetch: not a gzip payload that lane inflates

# the check of many payloads' CRCs at once (see :mod:`.crc` and :func:`check_words`)
CHECK_OK = 0xFFFFFFFF  # crc32(data with CRC words, 0xFFFFFFFF) when every CRC is right
CHECK_CHUNK = 256 << 10  # payload bytes the fast lane checks at a time, while in cache
# CRC-32 engines the fast lane's kernel calls itself (else it is given a Python callable)
CRC_ISAL = 1  # ISA-L's crc32_gzip_refl, when the kernel's crc_engine_at found it
CRC_LIBDEFLATE = 2  # libdeflate's, linked into the gzip lane (_messages/_gzip.c)

# One scanned message, as the kernel writes it (native byte order, 24 bytes)
RECORD = np.dtype(
    [
        ("start", "=i8"),  # position of LENGTH in the buffer
        ("length", "=i4"),  # LENGTH
        ("crc", "=u4"),  # stored CRC32
        ("magic", "u1"),
        ("codec", "u1"),  # ATTRIBUTES & 3 (magic 1), else 0
        ("pad", "V6"),
    ]
)
MIN_SIZE = LENGTH_SIZE + MIN_LENGTH  # 9: the smallest message
_BINARY = pa.binary()


# Every fact _kernel.h repeats, as _kernel (and the gzip lane, _gzip) exports it: a build that
# disagrees (a drift, a stale build) is not used, with a warning; one without the fast lane's
# functions neither.
KERNEL_CONSTANTS: Mapping[str, int] = {
    "RECORD_SIZE": RECORD.itemsize,
    **{f"RECORD_{k.upper()}": v[1] for k, v in (RECORD.fields or {}).items() if k != "pad"},
    "LENGTH_SIZE": LENGTH_SIZE,
    "MIN_LENGTH": MIN_LENGTH,
    "MIN_LENGTH_V1": MIN_LENGTH_V1,
    "HEADER_V0_SIZE": HEADER_V0_SIZE,
    "HEADER_V1_SIZE": HEADER_V1_SIZE,
    "MAX_MESSAGE_LENGTH": MAX_MESSAGE_LENGTH,
    "CODEC_MASK": CODEC_MASK,
    **{f"CODEC_{name.upper()}": cid for cid, name in CODEC_NAMES.items()},
    "ST_END": END,
    "ST_SHORT": SHORT,
    "ST_PARTIAL": PARTIAL,
    "ST_BAD_LENGTH": BAD_LENGTH,
    "ST_BAD_MAGIC": BAD_MAGIC,
    "ST_BAD_CODEC": BAD_CODEC,
    "ST_SHORT_V1": SHORT_V1,
    "ST_WRAPPER": WRAPPER,
    "ST_FULL": FULL,
    "ST_BAD_SNAPPY": BAD_SNAPPY,
    "ST_BAD_CRC": BAD_CRC,
    "ST_BAD_GZIP": BAD_GZIP,
    "CHECK_OK": CHECK_OK,
    "CHECK_CHUNK": CHECK_CHUNK,
    "CRC_ISAL": CRC_ISAL,
    "CRC_LIBDEFLATE": CRC_LIBDEFLATE,
}
kernel = load_kernel(
    "kafka_pyspark._messages._kernel",
    lambda m: all(hasattr(m, f) for f in ("snappy_fetch", "wrapped_rows", "crc_engine_at")),
    KERNEL_CONSTANTS,
)
ENGINE = "kernel" if kernel is not None else "python"
# the CRC-32 engine the kernel's checks of rows call: ISA-L's called from C (CRC_ISAL) when it
# is in python-isal's module (its address found by crc.isal_crc_address), else ``crc32`` called
# back
KERNEL_CRC: Callable[..., int] | int = (
    CRC_ISAL if isal_zlib is not None and kernel is not None
    and kernel.crc_engine_at(isal_crc_address(isal_zlib.__file__)) else crc32)


class Scan(NamedTuple):
    """What :func:`scan` found in ``buf[pos:end]``."""

    buf: memoryview
    recs: npt.NDArray[Any]  # RECORD, one per complete, well-formed message
    end: int  # position after the last of them (where the walk stopped)
    status: int
    value: int  # the LENGTH, MAGIC or ATTRIBUTES that stopped the walk (see status)
    leaves: int  # uncompressed messages among recs
    leaf_bytes: int  # their payload bytes


def payload_start(recs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    start: npt.NDArray[np.int64] = recs["start"] + HEADER_V0_SIZE
    start += recs["magic"]
    return start


def payload_size(recs: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    size: npt.NDArray[np.int64] = recs["length"].astype(np.int64)
    size -= HEADER_V0_SIZE - LENGTH_SIZE
    size -= recs["magic"]
    return size


def scan(buf: memoryview, pos: int, end: int, stop: int) -> Scan:
    """The complete messages of ``buf[pos:end]`` that start before ``stop``, up to the first
    incomplete or malformed one."""
    cap = max(0, min(end, stop) - pos) // MIN_SIZE + 1
    # from Arrow's pool (it keeps freed memory): an mmap per call costs more than the scan
    recs = np.frombuffer(pa.allocate_buffer(cap * RECORD.itemsize), dtype=RECORD)
    if kernel is not None:
        n, at, status, value, leaves, leaf_bytes = kernel.scan(buf, pos, end, stop, recs)
    else:
        n, at, status, value, leaves, leaf_bytes = _scan_python(buf, pos, end, stop, recs)
    return Scan(buf, recs[:n], at, status, value, leaves, leaf_bytes)


def _scan_python(
    buf: memoryview, pos: int, end: int, stop: int, recs: npt.NDArray[Any]
) -> tuple[int, int, int, int, int, int]:
    """:func:`scan` in Python: a plain loop over the LENGTH fields, then every check in bulk.

    The loop does not check LENGTH (that would cost as much as the loop): a negative one is
    masked to a huge one, so the walk always moves forward and ends. The first start where
    anything is wrong (too few bytes, a LENGTH out of range, an incomplete message, a bad
    header) ends the scan there; what the loop found after it is dropped.
    """
    view = buf[:end]
    starts: list[int] = []
    append = starts.append
    unpack = LENGTH.unpack_from
    limit = min(end, stop)
    try:
        while pos < limit:
            append(pos)
            pos += (unpack(view, pos)[0] & 0x7FFFFFFF) + LENGTH_SIZE
    except struct.error:  # fewer than 4 bytes at the last start
        pass
    if not starts:
        return 0, pos, END, 0, 0, 0
    first = np.array(starts, dtype=np.int64)
    head = np.take(np.frombuffer(view, dtype=np.uint8), first[:, None] + np.arange(10),
                   mode="clip")  # LENGTH, MAGIC, ATTRIBUTES, CRC32 (magic 1)
    length = head[:, :4].copy().view(">i4")[:, 0]
    magic, attributes = head[:, 4], head[:, 5]
    v1 = magic == 1
    codec = np.where(v1, attributes & CODEC_MASK, 0)
    crc = np.where(v1, head[:, 6:10].copy().view(">u4")[:, 0],
                   head[:, 5:9].copy().view(">u4")[:, 0])
    problems = [  # in the order the kernel checks them, with the value it reports
        (SHORT, end - first < LENGTH_SIZE, None),
        (BAD_LENGTH, (length < MIN_LENGTH) | (length > MAX_MESSAGE_LENGTH), length),
        (PARTIAL, first + LENGTH_SIZE + length > end, length),
        (BAD_MAGIC, magic > 1, magic),
        (SHORT_V1, v1 & (length < MIN_LENGTH_V1), length),
        (BAD_CODEC, v1 & (codec > CODEC_SNAPPY), attributes),
    ]
    n = len(first)
    status, value = END, 0
    if bool(np.logical_or.reduce([mask for _, mask, _ in problems]).any()):
        for kind, mask, values in problems:
            hit = np.flatnonzero(mask[:n])
            if len(hit):
                n = int(hit[0])
                status, value = kind, 0 if values is None else int(values[n])
        pos = starts[n]
    out = recs[:n]
    out["start"] = first[:n]
    out["length"] = length[:n]
    out["crc"] = crc[:n]
    out["magic"] = magic[:n]
    out["codec"] = codec[:n]
    leaf = codec[:n] == 0
    leaf_bytes = int(payload_size(out)[leaf].sum())
    return n, pos, status, value, int(leaf.sum()), leaf_bytes


class Piece(NamedTuple):
    """A stretch of scanned messages whose uncompressed payloads become rows, in order."""

    scan: Scan
    lo: int  # recs[lo:hi]
    hi: int


Bad = tuple[int, int, int]  # (piece index, record index in its scan, computed CRC32)


def gather(pieces: Sequence[Piece], verify_crc: bool) -> tuple[pa.Array, Bad | None]:
    """The payloads of the uncompressed messages of ``pieces`` (in order) as one Arrow binary
    column, and, when ``verify_crc``, where the first payload whose CRC32 is wrong is (None
    when all are right)."""
    count = sum(_leaves(p) for p in pieces)
    total = sum(_leaf_bytes(p) for p in pieces)
    if total > INT32_MAX:
        from kafka_pyspark.errors import DecompressedSizeError

        raise DecompressedSizeError(
            "the decoded values of one call exceed 2 GiB (one Arrow binary column); "
            "use a smaller fetch size or max.decompressed.size"
        )
    # Arrow's allocator keeps freed memory: no page faults on every call's fresh buffers
    data_buffer = pa.allocate_buffer(total + 4)  # 4 bytes for the last CRC word
    offsets_buffer = pa.allocate_buffer(4 * (count + 1))
    data = np.frombuffer(data_buffer, dtype=np.uint8)
    data[total:] = 0
    offsets = np.frombuffer(offsets_buffer, dtype=np.int32)
    offsets[0] = 0
    bad: Bad | None = None
    if kernel is not None:
        words = np.empty(count, dtype=np.uint32)
        dpos, k = 0, 0
        for p in pieces:
            dpos, k = kernel.gather(p.scan.buf, p.scan.recs, p.lo, p.hi, data, dpos, offsets,
                                    words, k)
        if verify_crc and not check_words(data, offsets, words, 0, count):
            bad = _first_bad(pieces)
    else:
        bad = _gather_python(pieces, data, offsets, count, verify_crc)
    values = pa.Array.from_buffers(_BINARY, count, [None, offsets_buffer, data_buffer])
    return values, bad


def check_words(data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int32],
                words: npt.NDArray[np.uint32], k0: int, k1: int) -> bool:
    """Whether payloads k0..k1-1 (back to back in ``data``, ending at the ``offsets``) all
    match their CRC ``words`` (the kernel's): one CRC call over them (:mod:`.crc` says why).
    ``data`` has 4 bytes to spare after them."""
    if k0 == k1:
        return True
    assert kernel is not None
    return bool(kernel.check_rows(data, offsets, words, k0, k1, KERNEL_CRC))


def leaf_count(scan: Scan, lo: int, hi: int) -> int:
    """Uncompressed messages among ``scan.recs[lo:hi]``."""
    if lo == 0 and hi == len(scan.recs):
        return scan.leaves
    return int((scan.recs["codec"][lo:hi] == 0).sum())


def _leaves(p: Piece) -> int:
    return leaf_count(p.scan, p.lo, p.hi)


def _leaf_bytes(p: Piece) -> int:
    if p.lo == 0 and p.hi == len(p.scan.recs):
        return p.scan.leaf_bytes
    recs = p.scan.recs[p.lo : p.hi]
    return int(payload_size(recs)[recs["codec"] == 0].sum())



def _gather_python(
    pieces: Sequence[Piece], data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int32],
    count: int, verify_crc: bool,
) -> Bad | None:
    """:func:`gather`'s copy and check with Arrow and numpy: per piece, one ``take`` of the
    payloads from a zero-copy binary array tiling its buffer (header, payload, header, ...)."""
    dpos, k = 0, 0
    crcs: list[npt.NDArray[np.uint32]] = []
    for p in pieces:
        recs = p.scan.recs[p.lo : p.hi]
        leaves = np.flatnonzero(recs["codec"] == 0)
        if not len(leaves):
            continue
        payloads = _tiles(p.scan.buf, recs).take(int_array(2 * leaves + 1))
        ends = np.frombuffer(payloads.buffers()[1], dtype=np.int64)[1 : len(leaves) + 1]
        size = int(ends[-1])
        data[dpos : dpos + size] = np.frombuffer(payloads.buffers()[2], dtype=np.uint8)[:size]
        offsets[k + 1 : k + 1 + len(leaves)] = ends + dpos
        dpos += size
        k += len(leaves)
        crcs.append(recs["crc"][leaves])
    if not verify_crc or not count:
        return None
    lengths = np.diff(offsets).astype(np.int64)
    if verify_concatenated(data[:dpos], lengths, np.concatenate(crcs), ends=offsets[1:]):
        return None
    return _first_bad(pieces)


def _tiles(buf: memoryview, recs: npt.NDArray[Any]) -> pa.Array:
    """A large-binary array over ``buf`` whose items are, in turn, each message's header and
    its payload (the messages of ``recs`` are back to back), without copying."""
    n = len(recs)
    tiles = np.empty(2 * n + 1, dtype=np.int64)
    tiles[0 : 2 * n : 2] = recs["start"]
    tiles[1 : 2 * n : 2] = payload_start(recs)
    tiles[2 * n] = int(recs["start"][-1]) + LENGTH_SIZE + int(recs["length"][-1])
    return pa.Array.from_buffers(
        pa.large_binary(), 2 * n, [None, pa.py_buffer(tiles), pa.py_buffer(buf)]
    )


def _first_bad(pieces: Sequence[Piece]) -> Bad | None:
    """The first uncompressed message of ``pieces`` whose CRC32 is wrong, message by message."""
    for i, p in enumerate(pieces):
        buf = p.scan.buf
        recs = p.scan.recs
        for k in range(p.lo, p.hi):
            if recs["codec"][k]:
                continue
            start = int(payload_start(recs[k : k + 1])[0])
            size = int(payload_size(recs[k : k + 1])[0])
            actual = crc32(buf[start : start + size])
            if actual != int(recs["crc"][k]):
                return i, k, actual
    return None  # pragma: no cover - the aggregate check is exact for a single fault

