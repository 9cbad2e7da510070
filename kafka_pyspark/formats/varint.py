"""Zigzag varints (Protobuf ``sint32``/``sint64``, Kafka's ``ByteUtils.readVarint``): one at a
time, or one per position for many positions at once (numpy)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kafka_pyspark.errors import CorruptMessageError

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

VARINT_MAX = 5  # bytes of a varint (int32)
VARLONG_MAX = 10  # bytes of a varlong (int64)


def read_one(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The zigzag varlong at ``buf[pos]`` and the position after it; past ``end`` or longer
    than 10 bytes raises :class:`CorruptMessageError` (the caller adds where)."""
    value = 0
    shift = 0
    for i in range(pos, min(end, pos + VARLONG_MAX)):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), i + 1
        shift += 7
    raise CorruptMessageError("malformed varint")


def read_many(buf: U8, pos: I64, width: int) -> tuple[I64, I64, int]:
    """The zigzag varints at every ``pos`` of ``buf``: values, byte lengths, and the index of
    the first malformed one (longer than ``width`` bytes, or running past ``buf``;
    ``len(pos)`` when there is none). One numpy pass per byte of the longest varint, over the
    varints still going (most Kafka varints are 1 or 2 bytes)."""
    n = len(pos)
    first = buf[pos]
    long = first >= 0x80
    if not long.any():
        values = (first >> 1).astype(np.int64) ^ -(first & 1).astype(np.int64)
        return values, np.ones(n, dtype=np.int64), n
    if width >= 2 and pos.max() + 1 < len(buf):  # all of 1 or 2 bytes: two gathers, no scatter
        second = buf[pos + 1]
        if not (long & (second >= 0x80)).any():
            raw2 = np.where(long, (first & 0x7F).astype(np.int64) | (second.astype(np.int64) << 7),
                            first.astype(np.int64))
            return (raw2 >> 1) ^ -(raw2 & 1), 1 + long.astype(np.int64), n
    raw = (first & 0x7F).astype(np.uint64)
    lengths = np.ones(n, dtype=np.int64)
    going = np.flatnonzero(long)
    k = 1
    while going.size:
        at = pos[going] + k
        if k >= width or (at >= len(buf)).any():
            return np.zeros(0, np.int64), lengths, int(going[0])
        byte = buf[at]
        raw[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        lengths[going] += 1
        going = going[byte >= 0x80]
        k += 1
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, lengths, n
