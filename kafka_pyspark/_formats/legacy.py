"""Message sets v0/v1 (Kafka 0.8 to 0.10 ``.log`` entries) -> Arrow (layout: :mod:`.layout`).

Python per message: these formats are read from archives, and a compressed wrapper's inner
messages each carry their own header, so there is little to vectorise. Wrappers are flattened:
every leaf message becomes a row with its absolute logical offset (magic 0 inner offsets are
absolute; magic 1 inner offsets are relative, the wrapper holding the last inner message's
absolute offset), ``inner_index`` 0..n-1 inside the outer wrapper and the outer wrapper's codec.
A magic-1 wrapper with the log-append-time bit gives its timestamp to every inner message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from kafka_pyspark._formats import codecs
from kafka_pyspark._formats.batch_layout import (
    BYTES_LENGTH,
    CODEC_NAMES,
    CODEC_NONE,
    ENTRY_HEADER,
    ENTRY_HEADER_SIZE,
    LEGACY_CODEC_MASK,
    LEGACY_CODECS,
    LEGACY_TIMESTAMP_TYPE,
    LOG_APPEND_TIME,
    LOG_SCHEMA,
    MAGIC_V1,
    MAX_NESTING_DEPTH,
    MESSAGE_CRC_START,
    MESSAGE_HEAD,
    MIN_MESSAGE_SIZE,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    TIMESTAMP,
    TIMESTAMP_TYPE,
)
from kafka_pyspark._messages.arrays import binary_array, int_array, string_array
from kafka_pyspark._messages.crc import crc32
from kafka_pyspark.errors import (
    CorruptMessageError,
    InvalidMessageSizeError,
    MessageError,
    UnknownCodecError,
    UnknownMagicError,
    with_context,
)

_TS_LIMIT = (1 << 63) // 1000


@dataclass
class _Message:
    offset: int
    magic: int
    codec: int
    ts: int | None  # ms, None for magic 0
    ts_type: int
    key: bytes | None
    value: bytes | memoryview | None


@dataclass
class _Rows:
    offset: list[int] = field(default_factory=list)
    inner: list[int] = field(default_factory=list)
    codec: list[str] = field(default_factory=list)
    value: list[bytes | None] = field(default_factory=list)
    key: list[bytes | None] = field(default_factory=list)
    ts: list[int | None] = field(default_factory=list)
    ts_type: list[int] = field(default_factory=list)

    def add(self, m: _Message, inner: int, codec: str) -> None:
        self.offset.append(m.offset)
        self.inner.append(inner)
        self.codec.append(codec)
        self.value.append(None if m.value is None else bytes(m.value))
        self.key.append(m.key)
        self.ts.append(m.ts)
        self.ts_type.append(m.ts_type)


def _message(view: memoryview, offset: int, verify: bool) -> _Message:
    """One message (the bytes after OFFSET and SIZE); ValueError-free: raises MessageError."""
    size = len(view)
    if size < MESSAGE_HEAD.size:
        raise InvalidMessageSizeError(f"message of {size} bytes is shorter than its header")
    crc, magic, attributes = MESSAGE_HEAD.unpack_from(view, 0)
    if magic not in MIN_MESSAGE_SIZE:
        raise UnknownMagicError(f"unknown magic {magic} in a message set entry")
    if size < MIN_MESSAGE_SIZE[magic]:
        raise InvalidMessageSizeError(f"magic {magic} message of {size} bytes is too short")
    if verify:
        actual = crc32(view[MESSAGE_CRC_START:])
        if actual != crc:
            raise CorruptMessageError(
                f"message CRC32 mismatch: stored {crc:#010x}, computed {actual:#010x}")
    q = MESSAGE_HEAD.size
    ts: int | None = None
    ts_type = NO_TIMESTAMP_TYPE
    if magic == MAGIC_V1:
        (ts,) = TIMESTAMP.unpack_from(view, q)
        q += TIMESTAMP.size
        ts_type = LOG_APPEND_TIME if attributes & LEGACY_TIMESTAMP_TYPE else 0
    key, q = _bytes(view, q, size, "key", last=False)
    value, q = _bytes(view, q, size, "value", last=True)
    codec = attributes & LEGACY_CODEC_MASK
    if codec not in LEGACY_CODECS:
        raise UnknownCodecError(f"message has unknown codec {codec}")
    return _Message(offset, magic, codec, ts, ts_type, None if key is None else bytes(key), value)


def _bytes(
    view: memoryview, q: int, size: int, what: str, *, last: bool
) -> tuple[memoryview | None, int]:
    (length,) = BYTES_LENGTH.unpack_from(view, q)
    q += BYTES_LENGTH.size
    end = q + max(length, 0)
    if length < -1 or end > size or (last and end != size) or (not last and end + 4 > size):
        raise InvalidMessageSizeError(f"{what} length {length} does not fit the {size}-byte "
                                      "message")
    return (None if length < 0 else view[q:end]), end


def _inner(wrapper: _Message, limit: int, verify: bool, depth: int) -> list[_Message]:
    """The leaf messages inside ``wrapper`` with absolute offsets, in order."""
    if depth >= MAX_NESTING_DEPTH:
        raise CorruptMessageError(f"compressed wrappers nested deeper than {MAX_NESTING_DEPTH}")
    if wrapper.value is None:
        raise CorruptMessageError("compressed wrapper has a null value")
    data = memoryview(codecs.decompress(wrapper.codec, wrapper.value, limit))
    found: list[_Message] = []
    pos, end = 0, len(data)
    while pos < end:
        if end - pos < ENTRY_HEADER_SIZE:
            raise InvalidMessageSizeError("inner message set ends inside an entry header")
        offset, size = ENTRY_HEADER.unpack_from(data, pos)
        stop = pos + ENTRY_HEADER_SIZE + size
        if size < 0 or stop > end:
            raise InvalidMessageSizeError(f"inner message of {size} bytes does not fit the "
                                          "decompressed set")
        found.append(_message(data[pos + ENTRY_HEADER_SIZE : stop], offset, verify))
        pos = stop
    if not found:
        raise CorruptMessageError("compressed wrapper holds no message")
    if wrapper.magic == MAGIC_V1:  # relative inner offsets: the wrapper holds the last one's
        shift = wrapper.offset - found[-1].offset
        for m in found:
            m.offset += shift
            if wrapper.ts_type == LOG_APPEND_TIME:
                m.ts, m.ts_type = wrapper.ts, LOG_APPEND_TIME
    leaves: list[_Message] = []
    for m in found:
        if m.codec == CODEC_NONE:
            leaves.append(m)
        else:
            leaves.extend(_inner(m, limit, verify, depth + 1))
    return leaves


def decode_messages(
    mv: memoryview, starts: list[int], base: int, *, verify_crc: bool, max_decompressed_size: int
) -> pa.RecordBatch:
    """The rows of the complete v0/v1 entries at ``starts`` of ``mv`` (``base``: the file
    position of ``mv[0]``; errors name the position of the outer entry at fault)."""
    rows = _Rows()
    for s in starts:
        offset, size = ENTRY_HEADER.unpack_from(mv, s)
        try:
            m = _message(mv[s + ENTRY_HEADER_SIZE : s + ENTRY_HEADER_SIZE + size], offset,
                         verify_crc)
            if m.codec == CODEC_NONE:
                rows.add(m, 0, CODEC_NAMES[CODEC_NONE])
                continue
            name = CODEC_NAMES[m.codec]
            for i, leaf in enumerate(_inner(m, max_decompressed_size, verify_crc, 0)):
                rows.add(leaf, i, name)
        except MessageError as e:  # raised inside the entry: with no position (all above)
            raise _placed(e, offset, base + s) from e
    return _assemble(rows)


def _placed(e: MessageError, offset: int, position: int) -> MessageError:
    """``e`` (same class and attributes) naming the outer entry: its logical offset in the
    text, its file position as ``offset``."""
    where = MessageError("", offset=position)  # MessageError's own wording of a position
    placed = with_context(e, f"message at logical offset {offset}", then=str(where))
    placed.offset = position
    return placed


def _assemble(rows: _Rows) -> pa.RecordBatch:
    offsets = np.asarray(rows.offset, dtype=np.int64)
    ms = np.asarray([NO_TIMESTAMP if t is None else t for t in rows.ts], dtype=np.int64)
    valid = (ms != NO_TIMESTAMP) & (np.abs(ms) < _TS_LIMIT)
    columns = [
        int_array(offsets),
        int_array(offsets + 1),
        int_array(np.asarray(rows.inner, dtype=np.int32)),
        string_array(rows.codec),
        binary_array(rows.value),
        binary_array(rows.key),
        int_array(np.where(valid, ms, 0) * 1000, valid, TIMESTAMP_TYPE),
        int_array(np.asarray(rows.ts_type, dtype=np.int32)),
        pa.nulls(len(offsets), LOG_SCHEMA.field("headers").type),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=LOG_SCHEMA)
