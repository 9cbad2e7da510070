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
PAD = VARLONG_MAX  # zero bytes a buffer handed to read_many must carry after its data

_SHIFTS = (7 * np.arange(VARLONG_MAX, dtype=np.uint64)).astype(np.uint64)
_INDEX = np.arange(VARLONG_MAX, dtype=np.int64)


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
    """The zigzag varints at every ``pos`` of ``buf`` (which carries :data:`PAD` zero bytes
    after any position asked for): values, byte lengths, and the index of the first varint
    longer than ``width`` bytes (``len(pos)`` when there is none)."""
    n = len(pos)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    window = buf[pos[:, None] + _INDEX[:width]]
    stop = window < 0x80
    ok = stop.any(axis=1)
    bad = n if ok.all() else int(np.argmin(ok))
    lengths = stop.argmax(axis=1).astype(np.int64) + 1
    keep = _INDEX[:width] < lengths[:, None]
    groups = (window & 0x7F).astype(np.uint64) << _SHIFTS[:width]
    raw = np.bitwise_or.reduce(np.where(keep, groups, np.uint64(0)), axis=1)
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, lengths, bad
