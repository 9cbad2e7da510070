"""gzip and snappy as Kafka 0.7.2 writes and reads them (docs/dev/PROTOCOL.md
"Measured: compression").

gzip (codec 1)::

    1f 8b 08 00 | 00000000 (mtime 0) | 00 (xfl) | ff (os) | raw deflate | crc32 LE | isize LE

    the header Java 17's ``GZIPOutputStream`` writes (0.7.2's producer); the body is zlib's
    deflate at Java's default level (6). Decoding takes any RFC 1952 member (mtime, names,
    extra fields) and concatenated members; bytes after the last member that do not start
    another member are ignored, as Java's ``GZIPInputStream`` does. A zlib stream (78 9c ...)
    is rejected: 0.7.2 fails it with "Not in GZIP format".

snappy (codec 2), snappy-java's stream framing (``SnappyOutputStream``)::

    82 53 4e 41 50 50 59 00 | int32 version (1) | int32 min compatible version (1)
    then per block: int32 compressed length | raw snappy block of <= 32 KiB of input

    Decoding also takes a header repeated between blocks (concatenated streams) and, when the
    payload does not start with the header, one raw snappy block (snappy-java's fallback).
    The snappy *framing format* (``ff 06 00 00 73 4e 61 50 70 59``) is not what 0.7 reads: it
    is rejected with a clear error.

Every decompression is bounded: ``limit`` bytes of output at most, checked before the bytes are
produced (snappy announces each block's size; gzip is inflated with ``max_length``).

Engines: gzip is inflated by ISA-L (python-isal's ``isal_zlib.decompressobj``, same API and
the same ``max_length`` bound as zlib's, and faster) when :mod:`.crc`'s probe found it, else
by stdlib ``zlib``; :data:`GZIP_ENGINE` names the one in use (here: the fast lane of
:mod:`.flat` inflates most gzip wrappers with libdeflate instead, when its optional gzip module,
``_gzip.c``, is built; whatever it leaves comes here). Compression always uses stdlib
``zlib`` at level 6: ISA-L's deflate is a different compressor (levels 0-3) and the wrapper must
be byte for byte what Java's ``GZIPOutputStream`` writes. CRCs come from :func:`.crc.crc32`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from itertools import accumulate
from typing import Any

from kafka_pyspark._messages.crc import crc32, isal_zlib
from kafka_pyspark.errors import (
    CodecUnavailableError,
    DecompressedSizeError,
    DecompressionError,
)

# gzip inflater: ``decompressobj(wbits)`` with zlib's interface (``decompress(data,
# max_length)``, ``eof``, ``unused_data``), and what it raises on bad input
_gzip_decompressobj: Callable[[int], Any]
if isal_zlib is not None:
    _gzip_decompressobj = isal_zlib.decompressobj
    GZIP_ERRORS: tuple[type[BaseException], ...] = (isal_zlib.error, zlib.error)
    GZIP_ENGINE = "isal"
else:  # pragma: no cover - isal is a dependency; the fallback is tested apart
    _gzip_decompressobj = zlib.decompressobj
    GZIP_ERRORS = (zlib.error,)
    GZIP_ENGINE = "zlib"

_cramjam_snappy: Any
_python_snappy: Any
try:  # python-snappy's own backend; its raw functions are the fastest available
    import cramjam

    _cramjam_snappy = cramjam.snappy
    _SNAPPY_ERRORS: tuple[type[BaseException], ...] = (
        cramjam.DecompressionError,
        cramjam.CompressionError,
    )
except ImportError:  # pragma: no cover - cramjam comes with python-snappy >= 0.7
    _cramjam_snappy = None
    _SNAPPY_ERRORS = ()
try:
    import snappy as _snappy_module

    _python_snappy = _snappy_module
    _SNAPPY_ERRORS = (*_SNAPPY_ERRORS, _snappy_module.UncompressError)
except ImportError:  # pragma: no cover
    _python_snappy = None
#: the library snappy is (de)compressed with where the compiled kernel is not used (None: none)
SNAPPY_ENGINE = ("cramjam" if _cramjam_snappy is not None
                 else "python-snappy" if _python_snappy is not None else None)

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # magic, deflate, no flags, mtime 0,
#                                                            xfl 0, os 255 (Java 17)
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_TRAILER = struct.Struct("<II")  # CRC32 of the data, ISIZE (length mod 2^32)
GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION is zlib's default, 6
MAX_GZIP_LEVEL = 9  # levels 0-9: what zlib and libdeflate both take (libdeflate goes to 12)

SNAPPY_JAVA_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_JAVA_HEADER = struct.Struct(">8sii")  # magic, version, min compatible version
SNAPPY_JAVA_HEADER = _SNAPPY_JAVA_HEADER.pack(SNAPPY_JAVA_MAGIC, 1, 1)
SNAPPY_JAVA_HEADER_SIZE = _SNAPPY_JAVA_HEADER.size  # 16
_SNAPPY_BLOCK_LENGTH = struct.Struct(">i")  # compressed length of the block that follows
SNAPPY_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size (bytes of input per block)
SNAPPY_FRAMING_MAGIC = b"\xff\x06\x00\x00sNaPpY"


def snappy_available() -> bool:
    return _cramjam_snappy is not None or _python_snappy is not None


def _need_snappy(offset: int | None) -> None:
    if not snappy_available():
        raise CodecUnavailableError(
            "snappy needs the python-snappy package (pip install python-snappy)", offset=offset
        )


# --- gzip ----------------------------------------------------------------------------------


def check_gzip_level(level: int) -> int:
    """``level`` when it is a deflate level both compressors take (0-9), else ValueError."""
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= MAX_GZIP_LEVEL:
        raise ValueError(
            f"gzip compression level must be an integer 0-{MAX_GZIP_LEVEL}, got {level!r}"
        )
    return level


def gzip_compress(data: bytes | bytearray | memoryview, level: int = GZIP_LEVEL) -> bytes:
    """One gzip member, byte for byte what Java 17's ``GZIPOutputStream`` writes (at the
    default ``level``, 6: Java's)."""
    deflate = zlib.compressobj(check_gzip_level(level), zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    trailer = _GZIP_TRAILER.pack(crc32(data), len(memoryview(data)) & 0xFFFFFFFF)
    return b"".join((GZIP_HEADER, body, trailer))


def gzip_decompress(payload: bytes | memoryview, limit: int, *, offset: int | None = None) -> bytes:
    """Inflate all gzip members of ``payload``; more than ``limit`` bytes out is an error."""
    if len(payload) < 2 or bytes(payload[:2]) != _GZIP_MAGIC:
        raise DecompressionError(
            "gzip wrapper payload is not in GZIP format (no 1f 8b header)", offset=offset
        )
    parts: list[bytes] = []
    total = 0
    data: bytes | memoryview = payload
    while True:
        inflater = _gzip_decompressobj(16 + zlib.MAX_WBITS)  # gzip header required
        total = _inflate_member(inflater, data, limit, total, parts, offset)
        rest = inflater.unused_data
        if rest[:2] != _GZIP_MAGIC:
            break  # GZIPInputStream ignores trailing bytes that do not start a member
        data = rest
    return parts[0] if len(parts) == 1 else b"".join(parts)


def gzip_inflate_hinted(payload: bytes | memoryview, hint: int, limit: int) -> bytes | None:
    """A payload of one gzip member inflating to ``hint`` bytes (its ISIZE) at most ``limit``,
    in one engine call; None for anything else (then :func:`gzip_decompress` decides)."""
    inflater = _gzip_decompressobj(16 + zlib.MAX_WBITS)
    try:
        out: bytes = inflater.decompress(payload, min(hint, limit) + 1)
    except GZIP_ERRORS:
        return None
    if not inflater.eof or len(out) > limit or inflater.unused_data[:2] == _GZIP_MAGIC:
        return None
    return out


# Output is asked for in steps of at most this: an engine may size its output buffer by the
# bound it is given, and a step bound keeps that small while the total stays checked.
_INFLATE_STEP = 1 << 20


def _inflate_member(
    inflater: Any, data: bytes | memoryview, limit: int, total: int, parts: list[bytes],
    offset: int | None,
) -> int:
    """Inflate one gzip member into ``parts``; returns the new total (at most ``limit``)."""
    while True:
        want = min(limit - total + 1, _INFLATE_STEP)  # one byte past the limit at most
        try:
            out = inflater.decompress(data, want)
        except GZIP_ERRORS as e:
            raise DecompressionError(f"undecodable gzip payload: {e}", offset=offset) from e
        total += len(out)
        if total > limit:
            raise DecompressedSizeError(
                f"gzip wrapper decompresses to more than {limit} bytes "
                "(max.decompressed.size)",
                offset=offset,
            )
        parts.append(out)
        if inflater.eof:
            return total
        if len(out) < want and not inflater.unconsumed_tail:
            raise DecompressionError("gzip payload is truncated (no end of stream)", offset=offset)
        data = inflater.unconsumed_tail


# --- snappy --------------------------------------------------------------------------------


def _raw_compress() -> Callable[[Any], Any]:
    if _cramjam_snappy is not None:
        return _cramjam_snappy.compress_raw  # type: ignore[no-any-return]
    return _python_snappy.compress  # type: ignore[no-any-return]  # pragma: no cover


def snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    """snappy-java stream framing: header, then one raw block per 32 KiB of ``data``."""
    _need_snappy(None)
    compress = _raw_compress()
    view = memoryview(data).cast("B")
    parts: list[Any] = [SNAPPY_JAVA_HEADER]
    pack = _SNAPPY_BLOCK_LENGTH.pack
    for start in range(0, len(view), SNAPPY_BLOCK_SIZE):
        block = compress(view[start : start + SNAPPY_BLOCK_SIZE])
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_raw_compress(data: bytes | bytearray | memoryview) -> bytes:
    """One raw snappy block (no framing): what snappy-java's raw fallback reads."""
    _need_snappy(None)
    return bytes(_raw_compress()(data))


def _varint32(data: memoryview, pos: int, end: int) -> int:
    """The little-endian base-128 uncompressed length that starts every raw snappy block
    (at most 5 bytes, each but the last with the high bit set)."""
    value = 0
    shift = 0
    for byte in data[pos : min(end, pos + 5)]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise DecompressionError("raw snappy block has no valid length header")


def snappy_blocks(
    payload: memoryview, *, offset: int | None = None
) -> tuple[list[memoryview], list[int]]:
    """The raw snappy blocks of a wrapper payload (zero-copy slices of it) and the
    uncompressed size each announces.

    Parses the snappy-java stream framing (or takes the whole payload as one raw block when
    the header is absent). Only headers are read: nothing is decompressed yet.
    """
    size = len(payload)
    if payload[:8] != SNAPPY_JAVA_MAGIC:
        if payload[: len(SNAPPY_FRAMING_MAGIC)] == SNAPPY_FRAMING_MAGIC:
            raise DecompressionError(
                "snappy payload uses the snappy framing format (ff 06 00 00 sNaPpY), which "
                "Kafka 0.7 cannot read; expected snappy-java's stream format (82 SNAPPY 00)",
                offset=offset,
            )
        try:
            return [payload], [_varint32(payload, 0, size)]
        except DecompressionError as e:
            raise DecompressionError(str(e), offset=offset) from None
    views: list[memoryview] = []
    usizes: list[int] = []
    pos = SNAPPY_JAVA_HEADER_SIZE if payload[:SNAPPY_JAVA_HEADER_SIZE] == SNAPPY_JAVA_HEADER else 0
    unpack_len = _SNAPPY_BLOCK_LENGTH.unpack_from
    raw_len = _cramjam_snappy.decompress_raw_len if _cramjam_snappy is not None else None
    while pos < size:
        if payload[pos] == 0x82 and payload[pos : pos + 8] == SNAPPY_JAVA_MAGIC:  # a header
            if size - pos < SNAPPY_JAVA_HEADER_SIZE:
                raise DecompressionError("snappy-java stream header is truncated", offset=offset)
            _, _, compatible = _SNAPPY_JAVA_HEADER.unpack_from(payload, pos)
            if compatible > 1:
                raise DecompressionError(
                    f"snappy-java stream needs reader version {compatible} (only 1 is known)",
                    offset=offset,
                )
            pos += SNAPPY_JAVA_HEADER_SIZE
            continue
        if size - pos < 4:
            raise DecompressionError("snappy-java block length is truncated", offset=offset)
        (length,) = unpack_len(payload, pos)
        pos += 4
        if length <= 0 or length > size - pos:
            raise DecompressionError(
                f"snappy-java block of {length} bytes at payload byte {pos - 4} does not fit "
                f"the {size}-byte payload",
                offset=offset,
            )
        end = pos + length
        block = payload[pos:end]
        if raw_len is not None and length > 2 and payload[pos + 2] < 0x80:
            usizes.append(raw_len(block))  # a varint of <= 3 bytes: cramjam reads the same
        else:
            try:
                usizes.append(_varint32(payload, pos, end))
            except DecompressionError as e:
                raise DecompressionError(str(e), offset=offset) from None
        views.append(block)
        pos = end
    return views, usizes


def snappy_decompress_into(
    blocks: list[memoryview],
    usizes: list[int],
    out: memoryview,
    *,
    offset: int | None = None,
) -> None:
    """Decompress raw snappy ``blocks`` back to back into ``out`` (``sum(usizes)`` bytes).

    ``usizes`` are the sizes the blocks announce (:func:`snappy_blocks`); a block holding
    another size is an error. With cramjam all blocks go through one C-level ``map``.
    """
    _need_snappy(offset)
    try:
        if _cramjam_snappy is not None:
            ends = list(accumulate(usizes))
            targets = map(out.__getitem__, map(slice, [0, *ends[:-1]], ends))
            written = list(map(_cramjam_snappy.decompress_raw_into, blocks, targets))
            if written != usizes:
                i = next(i for i, (w, u) in enumerate(zip(written, usizes, strict=True)) if w != u)
                raise DecompressionError(
                    f"snappy block announced {usizes[i]} bytes but held {written[i]}",
                    offset=offset,
                )
        else:  # pragma: no cover - python-snappy without cramjam
            pos = 0
            for block, usize in zip(blocks, usizes, strict=True):
                raw = _python_snappy.decompress(bytes(block))
                if len(raw) != usize:
                    raise DecompressionError(
                        f"snappy block announced {usize} bytes but held {len(raw)}", offset=offset
                    )
                out[pos : pos + usize] = raw
                pos += usize
    except _SNAPPY_ERRORS as e:
        raise DecompressionError(f"undecodable snappy payload: {e}", offset=offset) from e


def snappy_decompress(
    payload: bytes | memoryview, limit: int, *, offset: int | None = None
) -> bytes:
    """Decompress a snappy wrapper payload (either format 0.7 reads); bounded by ``limit``."""
    view = memoryview(payload).cast("B") if not isinstance(payload, memoryview) else payload
    blocks, usizes = snappy_blocks(view, offset=offset)
    total = sum(usizes)
    if total > limit:
        raise DecompressedSizeError(
            f"snappy wrapper decompresses to {total} bytes, more than {limit} "
            "(max.decompressed.size)",
            offset=offset,
        )
    out = bytearray(total)
    snappy_decompress_into(blocks, usizes, memoryview(out), offset=offset)
    return bytes(out)
