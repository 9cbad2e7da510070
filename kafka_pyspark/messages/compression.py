"""gzip and snappy as Kafka 0.7.2 writes and reads them (BROKER-FACTS.md "Compression").

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
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

from kafka_pyspark.errors import (
    CodecUnavailableError,
    DecompressedSizeError,
    DecompressionError,
)

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

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # magic, deflate, no flags, mtime 0,
#                                                            xfl 0, os 255 (Java 17)
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_TRAILER = struct.Struct("<II")  # CRC32 of the data, ISIZE (length mod 2^32)
GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION is zlib's default, 6

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


def gzip_compress(data: bytes | bytearray | memoryview) -> bytes:
    """One gzip member, byte for byte what Java 17's ``GZIPOutputStream`` writes."""
    deflate = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflate.compress(data) + deflate.flush()
    trailer = _GZIP_TRAILER.pack(zlib.crc32(data), len(memoryview(data)) & 0xFFFFFFFF)
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
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header required
        try:
            out = inflater.decompress(data, limit - total + 1)
        except zlib.error as e:
            raise DecompressionError(f"undecodable gzip payload: {e}", offset=offset) from e
        total += len(out)
        if total > limit:
            raise DecompressedSizeError(
                f"gzip wrapper decompresses to more than {limit} bytes "
                "(max.decompressed.size)",
                offset=offset,
            )
        if not inflater.eof:
            raise DecompressionError("gzip payload is truncated (no end of stream)", offset=offset)
        parts.append(out)
        rest = inflater.unused_data
        if rest[:2] != _GZIP_MAGIC:
            break  # GZIPInputStream ignores trailing bytes that do not start a member
        data = rest
    return parts[0] if len(parts) == 1 else b"".join(parts)


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
    """The little-endian base-128 uncompressed length that starts every raw snappy block."""
    value = 0
    for i in range(5):
        if pos + i >= end:
            break
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return value
    raise DecompressionError("raw snappy block has no valid length header")


def snappy_blocks(payload: memoryview, *, offset: int | None = None) -> list[tuple[int, int, int]]:
    """``(start, end, uncompressed size)`` of each raw snappy block in a wrapper payload.

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
            return [(0, size, _varint32(payload, 0, size))]
        except DecompressionError as e:
            raise DecompressionError(str(e), offset=offset) from None
    blocks: list[tuple[int, int, int]] = []
    pos = 0
    unpack_len = _SNAPPY_BLOCK_LENGTH.unpack_from
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
        try:
            usize = _varint32(payload, pos, pos + length)
        except DecompressionError as e:
            raise DecompressionError(str(e), offset=offset) from None
        blocks.append((pos, pos + length, usize))
        pos += length
    return blocks


def snappy_decompress_into(
    payload: memoryview,
    blocks: list[tuple[int, int, int]],
    out: memoryview,
    *,
    offset: int | None = None,
) -> None:
    """Decompress ``blocks`` of ``payload`` back to back into ``out`` (their exact total size)."""
    _need_snappy(offset)
    pos = 0
    try:
        if _cramjam_snappy is not None:
            into = _cramjam_snappy.decompress_raw_into
            for start, end, usize in blocks:
                written = into(payload[start:end], out[pos : pos + usize])
                if written != usize:
                    raise DecompressionError(
                        f"snappy block announced {usize} bytes but held {written}", offset=offset
                    )
                pos += usize
        else:  # pragma: no cover - python-snappy without cramjam
            for start, end, usize in blocks:
                raw = _python_snappy.decompress(bytes(payload[start:end]))
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
    blocks = snappy_blocks(view, offset=offset)
    total = sum(b[2] for b in blocks)
    if total > limit:
        raise DecompressedSizeError(
            f"snappy wrapper decompresses to {total} bytes, more than {limit} "
            "(max.decompressed.size)",
            offset=offset,
        )
    out = bytearray(total)
    snappy_decompress_into(view, blocks, memoryview(out), offset=offset)
    return bytes(out)
