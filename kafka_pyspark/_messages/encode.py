"""Messages and message sets -> bytes, as Kafka 0.7.2's producer writes them.

Layout: :mod:`kafka_pyspark._messages.layout`; codecs: :mod:`kafka_pyspark._messages.compression`.
A compressed set is ONE magic-1 wrapper message whose payload is the compressed concatenation of
the real messages (docs/dev/PROTOCOL.md "Compression by nesting"): offsets then address the wrapper,
never the inner messages.

The Arrow paths (:func:`encode_message_set_arrow`, and :func:`encode_message_sets_arrow` for
many sets cut from one array in one call) never loop over messages in Python: a CRC per message
is what the format needs, so it is one C call per message through ``map`` (on the bytes objects
Arrow creates in one C++ loop); the headers of all messages are one numpy record array; and the
payloads are copied once, interleaved with the headers, by a strided numpy copy (payloads of one
size) or an Arrow ``take`` (see :func:`_frame`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._messages import compression
from kafka_pyspark._messages.compression import (
    GZIP_LEVEL,
    SNAPPY_BLOCK_SIZE,
    check_gzip_level,
)
from kafka_pyspark._messages.crc import crc32, crc32_many, isal_crc_address, isal_zlib
from kafka_pyspark._messages.layout import (
    CODEC_GZIP,
    CODEC_NONE,
    CODEC_SNAPPY,
    HEADER_V0,
    HEADER_V1,
    HEADER_V1_SIZE,
    MAX_MESSAGE_LENGTH,
    MIN_LENGTH_BY_MAGIC,
    MIN_LENGTH_V0,
    MIN_LENGTH_V1,
    codec_id,
)
from kafka_pyspark._messages.outputs import Buffer, OutputPool
from kafka_pyspark._messages.walk import KERNEL_CONSTANTS
from kafka_pyspark._shared.native import load_kernel
from kafka_pyspark._wire.protocol import INT32_MAX
from kafka_pyspark.errors import (
    MessageError,
    MessageTooLargeError,
    SchemaError,
    UnknownCodecError,
    UnknownMagicError,
)

# the compiled encode pass (``_encode.c``, optional): used when it imports and states the same
# layout; KAFKA_PYSPARK_PURE=1 forces the pure path (kafka_pyspark/_shared/native.py)
ENCODE_CONSTANTS = {**KERNEL_CONSTANTS, "SNAPPY_BLOCK_SIZE": SNAPPY_BLOCK_SIZE}
_kernel = load_kernel(
    "kafka_pyspark._messages._encode", lambda m: hasattr(m, "encode_sets"), ENCODE_CONSTANTS
)
ENGINE = "kernel" if _kernel is not None else "python"
_OUTPUTS = OutputPool()  # where the kernel writes the sets (reused memory)
# the messages' CRCs: ISA-L's CRC-32 called from C when python-isal's module has it (the decode
# kernel's engine too), else libdeflate's
ENCODE_CRC = "isal" if _kernel is not None and isal_zlib is not None and (
    _kernel.crc_engine_at(isal_crc_address(isal_zlib.__file__))
) else "libdeflate"
# ... and, where the CPU has AVX-512 carry-less multiply, payloads of up to 2 KiB by the kernel's
# four fold lanes instead (_frame.c: the same CRC-32s, several payloads at once)
ENCODE_LANES = _kernel is not None and bool(_kernel.frame_lanes(-1))
# gzip level when none is given, on both paths: 6, zlib's default and so Java's (what 0.7.2's
# producer writes); libdeflate's 6 deflates about twice as fast as zlib's, for output about 1.5%
# larger on JSON-like values (its 7 is no larger than zlib's 6, and slower: docs/writing.md)
GZIP_DEFAULT_LEVEL = GZIP_LEVEL

_OVERHEAD = MIN_LENGTH_BY_MAGIC  # LENGTH - payload size, per magic
_MAX_PAYLOAD = {m: MAX_MESSAGE_LENGTH - o for m, o in _OVERHEAD.items()}


def _check_magic(magic: int) -> None:
    if magic not in (0, 1) or isinstance(magic, bool):
        raise UnknownMagicError(f"cannot encode MAGIC {magic!r} (0 or 1)")


def _too_large(size: int, what: str = "message payload") -> MessageTooLargeError:
    return MessageTooLargeError(
        f"{what} of {size} bytes exceeds the {MAX_MESSAGE_LENGTH}-byte message bound"
    )


def encode_message(
    payload: bytes | bytearray | memoryview, *, magic: int = 1, codec: int | str = 0
) -> bytes:
    """One message: LENGTH, MAGIC, [ATTRIBUTES], CRC32 of ``payload``, ``payload``.

    ``codec`` only sets the ATTRIBUTES bits (the caller passes an already compressed payload
    for a wrapper). Magic 0 has no ATTRIBUTES byte, so it can only carry codec 0.
    """
    _check_magic(magic)
    cid = codec_id(codec)
    size = len(memoryview(payload).cast("B"))
    if size > _MAX_PAYLOAD[magic]:
        raise _too_large(size)
    if magic == 1:
        return HEADER_V1.pack(size + MIN_LENGTH_V1, 1, cid, zlib.crc32(payload)) + bytes(payload)
    if cid != CODEC_NONE:
        raise UnknownCodecError(
            f"a magic-0 message has no ATTRIBUTES byte, so it cannot carry codec {cid}"
        )
    return HEADER_V0.pack(size + MIN_LENGTH_V0, 0, zlib.crc32(payload)) + bytes(payload)


def _wrap(inner: bytes | memoryview, cid: int, level: int | None = None) -> bytes:
    if not inner or cid == CODEC_NONE:
        return inner if isinstance(inner, bytes) else bytes(inner)
    if cid == CODEC_GZIP:
        payload = compression.gzip_compress(inner, GZIP_LEVEL if level is None else level)
    elif cid == CODEC_SNAPPY:
        payload = compression.snappy_compress(inner)
    else:  # pragma: no cover - codec_id only returns known ids
        raise UnknownCodecError(f"unknown compression codec {cid}")
    if len(payload) > _MAX_PAYLOAD[1]:
        raise _too_large(len(payload), "compressed wrapper payload")
    return HEADER_V1.pack(len(payload) + MIN_LENGTH_V1, 1, cid, crc32(payload)) + payload


def encode_message_set(
    values: Iterable[bytes | bytearray | memoryview | str] | pa.Array | pa.ChunkedArray,
    *,
    compression: str | int = "none",
    magic: int = 1,
) -> bytes:
    """A message set holding ``values`` in order.

    ``values``: bytes-like (``str`` is encoded as UTF-8), or a pyarrow binary/string array.
    ``compression`` none: the messages back to back; gzip/snappy (or 1/2): ONE magic-1 wrapper
    whose payload is the compressed concatenation of magic-``magic`` messages (snappy in
    snappy-java's stream framing). No values give an empty set (b"").
    """
    cid = codec_id(compression)
    _check_magic(magic)
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return encode_message_set_arrow(values, compression=cid, magic=magic)
    parts: list[Any] = []
    append = parts.append
    crc32 = zlib.crc32
    overhead = _OVERHEAD[magic]
    limit = _MAX_PAYLOAD[magic]
    pack = HEADER_V1.pack if magic == 1 else HEADER_V0.pack
    for value in values:
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, (bytes, bytearray, memoryview)):
            raise SchemaError(
                f"message values must be bytes or str, got {type(value).__name__}"
            )
        size = len(value) if not isinstance(value, memoryview) else value.nbytes
        if size > limit:
            raise _too_large(size)
        if magic == 1:
            append(pack(size + overhead, 1, 0, crc32(value)))
        else:
            append(pack(size + overhead, 0, crc32(value)))
        append(value)
    return _wrap(b"".join(parts), cid)


def encode_message_set_arrow(
    values: pa.Array | pa.ChunkedArray, *, compression: str | int = "none", magic: int = 1
) -> bytes:
    """:func:`encode_message_set` for a pyarrow binary/string array (the writer's path)."""
    cid = codec_id(compression)
    _check_magic(magic)
    if _kernel is not None:
        out, _ = _kernel_sets(values, np.array([0, len(values)]), 0, magic, cid, None, None)
        assert isinstance(out, bytes)  # not pooled: one set, all of it
        return out
    return _wrap(_encode_arrow(values, magic), cid)


def encode_message_sets_arrow(
    values: pa.Array | pa.ChunkedArray,
    boundaries: Sequence[int] | npt.NDArray[np.integer[Any]],
    *,
    compression: str | int = "none",
    magic: int = 1,
    level: int | None = None,
    crcs_out: npt.NDArray[np.uint32] | None = None,
) -> list[bytes | memoryview]:
    """Many message sets from one Arrow array in one call: set ``j`` holds
    ``values[boundaries[j]:boundaries[j + 1]]``, byte for byte what
    ``encode_message_set_arrow`` gives for that slice (one wrapper per set when compressed).

    ``boundaries`` are non-decreasing row indices within ``0..len(values)`` (``k + 1`` of them
    for ``k`` sets). Headers and CRCs of all rows are computed at once, so the cost per set is
    one copy (or one compression), not a Python loop over its messages.

    ``level``: the gzip level (0-9; None: :data:`GZIP_DEFAULT_LEVEL`).
    ``crcs_out``: a numpy ``uint32`` array of ``boundaries[-1] - boundaries[0]`` items, filled
    with each (inner) message's CRC32 in row order (the sets' digests are computed from them).

    With the compiled kernel (:data:`ENGINE` ``"kernel"``) the sets are memoryviews of one
    buffer (a reused one, :mod:`.outputs`; valid as long as the view is held),
    else bytes; the same bytes either way for
    none and snappy; gzip bodies differ (libdeflate's deflate, not zlib's) but hold the same
    messages.
    """
    cid = codec_id(compression)
    _check_magic(magic)
    if level is not None:
        check_gzip_level(level)
    cuts = np.asarray(boundaries, dtype=np.int64)
    if cuts.ndim != 1 or len(cuts) < 1:
        raise ValueError("boundaries must be a 1-D sequence of at least one row index")
    if _kernel is not None:
        try:
            return _kernel_sets_of(values, cuts, magic, cid, level, crcs_out)
        except (ValueError, MessageError):
            _check_order(cuts)  # the kernel checks the order itself: it is raised first, as below
            raise
    _check_order(cuts)
    first, last = _check_range(cuts, len(values))
    _check_crcs_out(crcs_out, last - first)
    rows = values.slice(first, last - first)
    framed, positions = _frame(rows, magic, first, crcs_out)
    at = positions[cuts - first].tolist()
    view = framed.data
    sets: list[bytes | memoryview] = [_wrap(view[a:b], cid, level) for a, b in pairwise(at)]
    return sets


def _check_order(cuts: npt.NDArray[np.int64]) -> None:
    if len(cuts) > 1 and bool((np.diff(cuts) < 0).any()):
        raise ValueError("boundaries must be non-decreasing")


def _check_range(cuts: npt.NDArray[np.int64], n: int) -> tuple[int, int]:
    first, last = int(cuts[0]), int(cuts[-1])
    if first < 0 or last > n:
        raise ValueError(f"boundaries must lie within 0..{n}, got {first}..{last}")
    return first, last


def _kernel_sets_of(
    values: pa.Array | pa.ChunkedArray,
    cuts: npt.NDArray[np.int64],
    magic: int,
    cid: int,
    level: int | None,
    crcs_out: npt.NDArray[np.uint32] | None,
) -> list[bytes | memoryview]:
    """encode_message_sets_arrow's sets by the kernel, its checks but the cuts' order (the
    kernel's own; the caller raises that error first, as the pure path does)."""
    first, last = _check_range(cuts, len(values))
    if last < first:
        _check_order(cuts)
    _check_crcs_out(crcs_out, last - first)
    rows = values.slice(first, last - first)
    out, ends = _kernel_sets(rows, cuts - first, first, magic, cid, level, crcs_out, pooled=True)
    whole = out.data if isinstance(out, np.ndarray) else memoryview(out)
    return [whole[a:b] for a, b in pairwise(ends.tolist())]


def _check_crcs_out(crcs_out: npt.NDArray[np.uint32] | None, rows: int) -> None:
    if crcs_out is None:
        return
    if not isinstance(crcs_out, np.ndarray) or crcs_out.dtype != np.uint32 or (
        crcs_out.shape != (rows,)
    ) or not crcs_out.flags.writeable or not crcs_out.flags.c_contiguous:
        raise ValueError(
            f"crcs_out must be a writable 1-D numpy uint32 array of {rows} items (one per row)"
        )


def _kernel_sets(
    rows: pa.Array | pa.ChunkedArray,
    cuts: npt.NDArray[np.int64],
    base: int,
    magic: int,
    cid: int,
    level: int | None,
    crcs_out: npt.NDArray[np.uint32] | None,
    *,
    pooled: bool = False,
) -> tuple[bytes | Buffer, npt.NDArray[np.int64]]:
    """All sets of ``rows`` (``cuts`` from 0; ``base``: the first row's index, for errors) by
    the kernel: the bytes (``pooled``: in a buffer of :data:`_OUTPUTS`) and
    where each set starts and ends in them. The errors are raised here, as the pure path
    raises them."""
    assert _kernel is not None
    _, offsets, data = _column(rows, base)
    # pooled: the kernel asks the pool for a buffer of the room the sets need (compressed:
    # their bound), instead of a fresh bytes object whose pages the sets would fault in
    into = _OUTPUTS.take if pooled else None
    try:
        out, at = _kernel.encode_sets(
            offsets, b"" if data is None else data, cuts, magic, cid,
            GZIP_DEFAULT_LEVEL if level is None else level, crcs_out, into,
        )
    except ValueError:  # the kernel checks each payload's size too: the typed error here
        biggest = int(np.diff(offsets).max()) if len(offsets) > 1 else 0
        if biggest > _MAX_PAYLOAD[magic]:
            raise _too_large(biggest) from None
        raise
    ends = np.frombuffer(at, dtype=np.int64)
    if cid != CODEC_NONE:
        payloads = np.diff(ends) - HEADER_V1_SIZE
        over = np.flatnonzero(payloads > _MAX_PAYLOAD[1])
        if len(over):
            raise _too_large(int(payloads[over[0]]), "compressed wrapper payload")
    return out, ends


def _encode_arrow(values: pa.Array | pa.ChunkedArray, magic: int) -> memoryview:
    """The framed messages as a view: :func:`_wrap` copies them once, or compresses them."""
    framed, _ = _frame(values, magic, 0)
    return framed.data


# One header per message as a numpy record (big-endian, unaligned fields), per magic
_HEADER_DTYPES = {
    1: np.dtype([("length", ">i4"), ("magic", "u1"), ("attributes", "u1"), ("crc", ">u4")]),
    0: np.dtype([("length", ">i4"), ("magic", "u1"), ("crc", ">u4")]),
}


def _column(
    values: pa.Array | pa.ChunkedArray, base: int
) -> tuple[pa.Array, npt.NDArray[np.int64], Any]:
    """``(binary array, offsets, data)`` of a binary/string array: value ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (``data`` a buffer, or None when all values are
    empty). ``base`` is added to row numbers in errors."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        offset_type: Any = np.int32
        binary = values.view(pa.binary())
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        offset_type = np.int64
        binary = values.view(pa.large_binary())
    elif pa.types.is_fixed_size_binary(kind) or pa.types.is_string_view(kind) or (
        pa.types.is_binary_view(kind)
    ):
        return _column(values.cast(pa.large_binary()), base)
    else:
        raise SchemaError(f"message values must be binary or string, got Arrow type {kind}")
    n = len(values)
    if values.null_count:
        first = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
        raise MessageError(
            f"value at index {base + first} is null: a 0.7 message cannot be null"
        )
    buffers = values.buffers()
    if n == 0 or buffers[1] is None:
        return binary, np.zeros(n + 1, dtype=np.int64), None
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[values.offset : values.offset + n + 1]
    return binary, offsets.astype(np.int64), buffers[2]


def _frame(
    values: pa.Array | pa.ChunkedArray,
    magic: int,
    base: int,
    crcs_out: npt.NDArray[np.uint32] | None = None,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The messages of all ``values``, back to back (numpy bytes), and where message ``i``
    starts in them (``n + 1`` positions, the last one the total size); ``crcs_out`` (when
    given) receives the messages' CRCs.

    The headers of all messages are built as one numpy record array; the payloads are copied
    once: through a strided view when they all have one size, else by an Arrow ``take`` that
    interleaves a binary array of headers with the binary array of payloads.
    """
    binary, offsets, data = _column(values, base)
    n = len(offsets) - 1
    header_dtype = _HEADER_DTYPES[magic]
    hsize = header_dtype.itemsize
    first = int(offsets[0])
    sizes = offsets[1:] - offsets[:-1]
    positions = offsets - first
    positions += np.arange(0, hsize * (n + 1), hsize, dtype=np.int64)
    if n == 0:
        return np.zeros(0, dtype=np.uint8), positions
    biggest, smallest = int(sizes.max()), int(sizes.min())
    if biggest > _MAX_PAYLOAD[magic]:
        raise _too_large(biggest)
    payload_bytes = int(offsets[-1]) - first
    headers = np.empty(n, dtype=header_dtype)
    headers["length"] = sizes + _OVERHEAD[magic]
    headers["magic"] = magic
    if magic == 1:
        headers["attributes"] = CODEC_NONE
    # a CRC per message: one C call each, on the bytes objects Arrow makes in one C++ loop
    headers["crc"] = crc32_many(binary.to_numpy(zero_copy_only=False), payload_bytes // n)
    if crcs_out is not None:
        crcs_out[:] = headers["crc"]
    payloads = np.frombuffer(data, dtype=np.uint8, count=payload_bytes, offset=first) if (
        payload_bytes
    ) else np.zeros(0, dtype=np.uint8)
    total = hsize * n + payload_bytes
    if biggest == smallest:  # one size: [header | payload] records, two strided copies
        out = np.empty(total, dtype=np.uint8)
        stride = hsize + biggest
        slot = np.dtype((np.void, hsize))
        np.ndarray((n,), slot, out, 0, (stride,))[...] = headers.view(slot)
        if biggest:
            np.ndarray((n, biggest), np.uint8, out, hsize, (stride, 1))[...] = (
                payloads.reshape(n, biggest)
            )
        return out, positions
    # header 0, payload 0, header 1, ...: take from [headers..., payloads...]
    large = total > INT32_MAX
    kind = pa.large_binary() if large else pa.binary()
    offset_type = np.int64 if large else np.int32
    tiles = np.empty(2 * n + 1, dtype=offset_type)
    tiles[: n + 1] = np.arange(0, hsize * (n + 1), hsize)
    tiles[n + 1 :] = offsets[1:] + (hsize * n - first)
    pool = np.concatenate((headers.view(np.uint8), payloads))
    both = pa.Array.from_buffers(kind, 2 * n, [None, pa.py_buffer(tiles), pa.py_buffer(pool)])
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2] = np.arange(n)
    order[1::2] = np.arange(n, 2 * n)
    framed = both.take(pa.array(order))
    out = np.frombuffer(framed.buffers()[2], dtype=np.uint8, count=total)
    return out, positions
