"""Decompression for the later formats: gzip, snappy, lz4 and zstd, every one bounded.

gzip and snappy are exactly 0.7's (:mod:`kafka_pyspark._messages.compression`: RFC 1952
members; snappy-java's stream framing or a raw block). lz4 is the LZ4 *frame* format
(``04 22 4d 18``), which Kafka's ``KafkaLZ4BlockOutputStream`` writes::

    magic (4) | FLG (1) | BD (1) | [content size (8)] | [dict id (4)] | HC (1) | blocks | end mark

    HC = (xxh32(FLG .. dict id, seed 0) >> 8) & 0xff

KAFKA-3160: before the fix (magic 0 messages kept it, for old clients) Kafka computed HC over
the magic bytes too, ``xxh32(magic .. dict id)``. Either checksum is accepted here: a frame
whose HC matches the broken one is patched to the right one before liblz4 reads it. zstd is a
zstd frame (``28 b5 2f fd``), usually without a content size, so it is read as a stream.

``limit`` bounds the output of every call; more is :class:`DecompressedSizeError`, checked
before the bytes are produced (lz4 and zstd are read with a ``max_length``).
"""

from __future__ import annotations

import lz4.frame
import zstandard

from kafka_pyspark._formats.batch_layout import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_SNAPPY,
    CODEC_ZSTD,
)
from kafka_pyspark._messages.compression import gzip_decompress, snappy_decompress
from kafka_pyspark.errors import (
    DecompressedSizeError,
    DecompressionError,
    UnknownCodecError,
)

LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01
_ZSTD_CHUNK = 1 << 20

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes | memoryview, seed: int = 0) -> int:
    """xxHash32 of ``data`` (for the few bytes of an LZ4 frame descriptor)."""
    b = bytes(data)
    n = len(b)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for k in range(4):
                lane = int.from_bytes(b[i + 4 * k : i + 4 * k + 4], "little")
                v[k] = (_rotl((v[k] + lane * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        lane = int.from_bytes(b[i : i + 4], "little")
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + b[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def lz4_header_checksum(frame: bytes | memoryview, *, kafka_3160: bool = False) -> int:
    """The HC byte of an LZ4 frame; ``kafka_3160``: the one pre-fix Kafka wrote."""
    end = _lz4_hc_position(memoryview(frame), None)
    return (xxh32(memoryview(frame)[0 if kafka_3160 else 4 : end]) >> 8) & 0xFF


def _lz4_hc_position(frame: memoryview, offset: int | None) -> int:
    if len(frame) < 7 or bytes(frame[:4]) != LZ4_MAGIC:
        raise DecompressionError("lz4 payload is not an LZ4 frame (no 04 22 4d 18)", offset=offset)
    flg = frame[4]
    end = 6 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0) + (4 if flg & _LZ4_FLG_DICT_ID else 0)
    if len(frame) <= end:
        raise DecompressionError("lz4 frame descriptor is truncated", offset=offset)
    return end


def _lz4_fixed(frame: memoryview, offset: int | None) -> bytes | memoryview:
    hc = _lz4_hc_position(frame, offset)
    stored = frame[hc]
    good = (xxh32(frame[4:hc]) >> 8) & 0xFF
    if stored == good:
        return frame
    if stored == (xxh32(frame[0:hc]) >> 8) & 0xFF:  # KAFKA-3160: patch to the right HC
        return b"".join((frame[:hc], bytes((good,)), frame[hc + 1 :]))
    raise DecompressionError(
        f"lz4 frame header checksum {stored:#04x} matches neither the LZ4 frame format "
        f"({good:#04x}) nor KAFKA-3160's", offset=offset
    )


def lz4_decompress(payload: bytes | memoryview, limit: int, *, offset: int | None = None) -> bytes:
    frame = _lz4_fixed(memoryview(payload), offset)
    inflater = lz4.frame.LZ4FrameDecompressor()
    try:
        out: bytes = inflater.decompress(frame, max_length=limit + 1)
    except RuntimeError as e:
        raise DecompressionError(f"undecodable lz4 payload: {e}", offset=offset) from e
    if len(out) > limit:
        raise DecompressedSizeError(
            f"lz4 payload decompresses to more than {limit} bytes (max.decompressed.size)",
            offset=offset,
        )
    if not inflater.eof:
        raise DecompressionError("lz4 payload is truncated (no end mark)", offset=offset)
    return out


def zstd_decompress(payload: bytes | memoryview, limit: int, *, offset: int | None = None) -> bytes:
    parts: list[bytes] = []
    total = 0
    try:
        inflater = zstandard.ZstdDecompressor().decompressobj()
        data: bytes | memoryview = payload
        # decompressobj has no output bound: feed the input in slices and check as it grows
        for start in range(0, len(data), _ZSTD_CHUNK // 16):
            part = inflater.decompress(data[start : start + _ZSTD_CHUNK // 16])
            total += len(part)
            if total > limit:
                raise DecompressedSizeError(
                    f"zstd payload decompresses to more than {limit} bytes "
                    "(max.decompressed.size)",
                    offset=offset,
                )
            parts.append(part)
        if not inflater.eof:
            raise DecompressionError("zstd payload is truncated (frame not ended)", offset=offset)
    except zstandard.ZstdError as e:
        raise DecompressionError(f"undecodable zstd payload: {e}", offset=offset) from e
    return b"".join(parts)


def decompress(
    codec: int, payload: bytes | memoryview, limit: int, *, offset: int | None = None
) -> bytes:
    """``payload`` decompressed by ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd)."""
    if codec == CODEC_GZIP:
        return gzip_decompress(payload, limit, offset=offset)
    if codec == CODEC_SNAPPY:
        return snappy_decompress(payload, limit, offset=offset)
    if codec == CODEC_LZ4:
        return lz4_decompress(payload, limit, offset=offset)
    if codec == CODEC_ZSTD:
        return zstd_decompress(payload, limit, offset=offset)
    names = ", ".join(f"{k} {v}" for k, v in CODEC_NAMES.items())
    raise UnknownCodecError(f"unknown compression codec {codec} ({names})", offset=offset)
