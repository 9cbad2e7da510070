"""A message set's identity for exactly-once delivery, computed alike by the writer and by the
read-back of a retry (docs/writing.md "Exactly once").

:class:`SetDigest` is ``(messages, inner_bytes, digest)``: the set's message count, the bytes of
its framed messages before compression, and ``zlib.crc32`` over the big-endian CRC32s of its
(inner) messages in order. It does not depend on the compressor that made a wrapper, so a gzip
set re-encoded by another deflate engine on a retry still matches.

Writer side: :func:`set_digests` from the CRCs the encoder reports (``crcs_out``). Log side:
:func:`log_units` walks raw FETCH bytes into :class:`LogUnit` s (a wrapper: the digest of its
inner messages; an uncompressed message: its CRC and size), which
:mod:`kafka_pyspark._write.matcher` matches against the recorded sets.
"""

from __future__ import annotations

import zlib
from itertools import accumulate, repeat
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from kafka_pyspark._messages.compression import gzip_decompress, snappy_decompress
from kafka_pyspark._messages.layout import (
    CODEC_GZIP,
    CODEC_MASK,
    CODEC_NONE,
    CODEC_SNAPPY,
    HEADER_V0,
    HEADER_V1,
    LENGTH,
    LENGTH_SIZE,
    MIN_LENGTH,
)
from kafka_pyspark.errors import MessageError

__all__ = ["LogUnit", "SetDigest", "digest_of_crcs", "log_units", "set_digest", "set_digests"]


class SetDigest(NamedTuple):
    """One message set: messages, framed inner bytes, CRC32 of its messages' CRC32s."""

    messages: int
    inner_bytes: int
    digest: int


class LogUnit(NamedTuple):
    """One message of a log as the read-back sees it. ``wrapped``: a compressed wrapper, whose
    ``inner`` is the digest of its inner messages; else an uncompressed message: ``inner`` is
    ``(1, its framed size, its CRC32)`` (``digest`` holds the message's own CRC here)."""

    wrapped: bool
    inner: SetDigest
    next_offset: int


def digest_of_crcs(crcs: npt.NDArray[np.uint32]) -> int:
    """CRC32 over the big-endian bytes of ``crcs`` (not copied when they already are: a
    writer converts all of an encoder call's CRCs at once, then digests slices of them)."""
    return zlib.crc32(crcs.astype(">u4", copy=False).data)


def set_digest(crcs: npt.NDArray[np.uint32], inner_bytes: int) -> SetDigest:
    """The digest of a set whose messages have the CRC32s ``crcs``."""
    return SetDigest(len(crcs), inner_bytes, digest_of_crcs(crcs))


def set_digests(
    crcs: npt.NDArray[np.uint32], counts: list[int], inner_bytes: list[int]
) -> list[SetDigest]:
    """The digests of consecutive sets: the first ``counts[0]`` CRCs are the first set's, and
    so on (one conversion to big-endian for all of them, not one per set)."""
    if sum(counts) != len(crcs) or len(counts) != len(inner_bytes):
        raise ValueError(f"{len(crcs)} CRCs for {len(inner_bytes)} sets of {sum(counts)} "
                         f"messages in {len(counts)}")
    view = crcs.astype(">u4", copy=False).data.cast("B")
    ends = list(accumulate(4 * n for n in counts))
    digests = map(zlib.crc32, map(view.__getitem__, map(slice, [0, *ends], ends)))
    # tuples made in C (a SetDigest's own __new__ is Python: a task makes thousands)
    return list(map(tuple.__new__, repeat(SetDigest),
                    zip(counts, inner_bytes, digests, strict=True)))


def _messages(data: bytes | memoryview, base: int) -> list[tuple[int, int, int, int, int]]:
    """(offset, next offset, codec, crc, payload start) of each complete message in ``data``;
    a partial message at the end is left out (a FETCH may cut one)."""
    out = []
    pos, end = 0, len(data)
    while pos + LENGTH_SIZE <= end:
        (length,) = LENGTH.unpack_from(data, pos)
        if length < MIN_LENGTH:
            raise MessageError(f"message at offset {base + pos}: LENGTH {length} is too small")
        nxt = pos + LENGTH_SIZE + length
        if nxt > end:
            break
        magic = data[pos + LENGTH_SIZE]
        if magic == 0:
            _, _, crc = HEADER_V0.unpack_from(data, pos)
            codec, start = CODEC_NONE, pos + HEADER_V0.size
        else:
            _, _, attributes, crc = HEADER_V1.unpack_from(data, pos)
            codec, start = attributes & CODEC_MASK, pos + HEADER_V1.size
        out.append((base + pos, base + nxt, codec, crc, start))
        pos = nxt
    return out


def _inflate(codec: int, payload: bytes | memoryview, limit: int, offset: int) -> bytes:
    if codec == CODEC_GZIP:
        return gzip_decompress(payload, limit, offset=offset)
    if codec == CODEC_SNAPPY:
        return snappy_decompress(payload, limit, offset=offset)
    raise MessageError(f"message at offset {offset}: unknown compression codec {codec}")


def log_units(data: bytes | memoryview, base: int, limit: int) -> list[LogUnit]:
    """The complete messages of a FETCH answer that starts at offset ``base``, each as a
    :class:`LogUnit` (wrappers decompressed, up to ``limit`` bytes each)."""
    view = memoryview(data)
    units = []
    for offset, nxt, codec, crc, start in _messages(view, base):
        end = nxt - base
        if codec == CODEC_NONE:
            units.append(LogUnit(False, SetDigest(1, end - (offset - base), crc), nxt))
            continue
        inner = _inflate(codec, view[start:end], limit, offset)
        crcs = np.array([m[3] for m in _messages(inner, 0)], dtype=np.uint32)
        units.append(LogUnit(True, set_digest(crcs, len(inner)), nxt))
    return units
