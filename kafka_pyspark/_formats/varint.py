"""Zigzag varints (Protobuf ``sint32``/``sint64``, Kafka's ``ByteUtils.readVarint``): one at a
time, or one per position for many positions at once (numpy).

A varint (int32) has at most :data:`VARINT_MAX` bytes and a raw value below 2**32, a varlong
(int64) at most :data:`VARLONG_MAX` bytes and 64 bits (the last byte may carry only the bits
that fit); anything else is malformed (:func:`read_one_checked`, :func:`read_many`, and the
kernel's ``varint`` in ``_v2kernel.c`` agree on this).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kafka_pyspark.errors import CorruptMessageError

I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]

VARINT_MAX = 5  # bytes of a varint (int32)
VARLONG_MAX = 10  # bytes of a varlong (int64)
VARINT_MALFORMED = 1  # longer than its width or out of its range (records.ST_MALFORMED)
VARINT_PAST = 2  # runs past the end it must stay before (records.ST_PAST)
# bits the last byte of a full-width varint may carry: 32 - 28 = 4, 64 - 63 = 1
_LAST_BITS = {VARINT_MAX: 4, VARLONG_MAX: 1}


def read_one_checked(buf: bytes | bytearray | memoryview, pos: int, end: int, width: int
                     ) -> tuple[int, int, int]:
    """(status, value, position after) of the zigzag varint of at most ``width`` bytes at
    ``buf[pos]``, ending before ``end``: status 0, :data:`VARINT_MALFORMED` or
    :data:`VARINT_PAST` (then value 0 and ``pos``)."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return 0, (b >> 1) ^ -(b & 1), pos + 1
    raw = 0
    for k in range(width):
        i = pos + k
        if i >= end:
            return VARINT_PAST, 0, pos
        b = buf[i]
        raw |= (b & 0x7F) << (7 * k)
        if b < 0x80:
            if k == width - 1 and b >> _LAST_BITS[width]:
                return VARINT_MALFORMED, 0, pos
            return 0, (raw >> 1) ^ -(raw & 1), i + 1
    return VARINT_MALFORMED, 0, pos


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
    a malformed one (longer than ``width`` bytes or out of range, or running past ``buf``;
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
        if k == width - 1 and ((byte < 0x80) & (byte >> _LAST_BITS[width] != 0)).any():
            return np.zeros(0, np.int64), lengths, int(going[0])
        raw[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        lengths[going] += 1
        going = going[byte >= 0x80]
        k += 1
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, lengths, n
