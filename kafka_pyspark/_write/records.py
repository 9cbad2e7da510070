"""The exactly-once records of one task (docs/writing.md "Exactly once"), packed big-endian.

Pure: bytes in, values out (:mod:`.store` keeps them, :mod:`.delivery` makes and reads them).

An **intent** record (one per window of message sets, recorded before the window's first byte
is sent)::

    version      u8   (1)
    topics       u16  (the sorted broker-partition lists the task routed over, first recorded
                       here: a retry routes over the same lists)
    per topic:   topic length u16, topic (ASCII), entries u32, per entry: broker i32, partition i32
    targets      u16
    per target:  topic length u16, topic (ASCII), broker i32, partition i32,
                 start i64 (the log end before this task's first set to it; -1: recorded by an
                 earlier window), sets u32,
                 per set: messages u32, inner bytes u64, digest u32

A **done** record (the task's commit message, written after the delivery barrier)::

    version      u8   (1)
    rows         u64
    targets      u16
    per target:  topic length u16, topic, broker i32, partition i32, messages u64, bytes u64,
                 sets u32
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._write.digest import SetDigest

__all__ = [
    "INTENT_SET_SIZE",
    "DoneRecord",
    "IntentWindow",
    "decode_done",
    "decode_intent",
    "encode_done",
    "encode_intent",
    "intent_target_size",
]

VERSION = 1
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_INTENT_TARGET = struct.Struct(">iiqI")
_SET = struct.Struct(">IQI")
_U32 = struct.Struct(">I")
_ENTRY = struct.Struct(">ii")
_DONE_TARGET = struct.Struct(">iiQQI")
#: bytes a set adds to an intent record
INTENT_SET_SIZE = _SET.size


def intent_target_size(topic: str) -> int:
    """Bytes a target adds to an intent record, besides its sets."""
    return _U16.size + len(topic) + _INTENT_TARGET.size


@dataclass
class IntentWindow:
    """One window's intent: per target its start (-1: recorded earlier) and its sets, in order."""

    starts: dict[TopicPartition, int] = field(default_factory=dict)
    sets: dict[TopicPartition, list[SetDigest]] = field(default_factory=dict)
    lists: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class DoneRecord:
    rows: int
    written: dict[TopicPartition, tuple[int, int, int]]


class RecordError(ValueError):
    """A record is not in this layout (truncated, another version, trailing bytes)."""


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, st: struct.Struct) -> tuple[int, ...]:
        if self.pos + st.size > len(self.data):
            raise RecordError(f"{self.what} record truncated at byte {self.pos}")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def topic(self) -> str:
        (n,) = self.take(_U16)
        if self.pos + n > len(self.data):
            raise RecordError(f"{self.what} record truncated at byte {self.pos}")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("ascii")

    def header(self) -> None:
        (version,) = self.take(_U8)
        if version != VERSION:
            raise RecordError(f"{self.what} record of version {version}, not {VERSION}")

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RecordError(f"{self.what} record has {len(self.data) - self.pos} bytes too many")


def _topic(topic: str) -> bytes:
    raw = topic.encode("ascii")
    return _U16.pack(len(raw)) + raw


def encode_intent(window: IntentWindow) -> bytes:
    out = [_U8.pack(VERSION), _U16.pack(len(window.lists))]
    for name, entries in window.lists.items():
        out.append(_topic(name))
        out.append(_U32.pack(len(entries)))
        out.extend(_ENTRY.pack(b, p) for b, p in entries)
    out.append(_U16.pack(len(window.sets)))
    for key, sets in window.sets.items():
        topic, broker, partition = key
        out.append(_topic(topic))
        out.append(_INTENT_TARGET.pack(broker, partition, window.starts.get(key, -1), len(sets)))
        out.append(_sets(sets))
    return b"".join(out)


def _sets(sets: Sequence[SetDigest]) -> bytes:
    """The per-set entries of a target, packed in one call (a window holds hundreds)."""
    return struct.pack(">" + _SET.format.lstrip(">") * len(sets), *chain.from_iterable(sets))


def decode_intent(data: bytes) -> IntentWindow:
    r = _Reader(data, "intent")
    r.header()
    window = IntentWindow()
    (ntopics,) = r.take(_U16)
    for _ in range(ntopics):
        name = r.topic()
        (count,) = r.take(_U32)
        window.lists[name] = tuple((b, p) for b, p in (r.take(_ENTRY) for _ in range(count)))
    (n,) = r.take(_U16)
    for _ in range(n):
        topic = r.topic()
        broker, partition, start, nsets = r.take(_INTENT_TARGET)
        key = (topic, broker, partition)
        if start >= 0:
            window.starts[key] = start
        window.sets[key] = [SetDigest(*r.take(_SET)) for _ in range(nsets)]
    r.end()
    return window


def encode_done(rows: int, written: Mapping[TopicPartition, tuple[int, int, int]]) -> bytes:
    out = [_U8.pack(VERSION), _U64.pack(rows), _U16.pack(len(written))]
    for (topic, broker, partition), (messages, nbytes, sets) in sorted(written.items()):
        out.append(_topic(topic))
        out.append(_DONE_TARGET.pack(broker, partition, messages, nbytes, sets))
    return b"".join(out)


def decode_done(data: bytes) -> DoneRecord:
    r = _Reader(data, "done")
    r.header()
    (rows,) = r.take(_U64)
    (n,) = r.take(_U16)
    written: dict[TopicPartition, tuple[int, int, int]] = {}
    for _ in range(n):
        topic = r.topic()
        broker, partition, messages, nbytes, sets = r.take(_DONE_TARGET)
        written[(topic, broker, partition)] = (messages, nbytes, sets)
    r.end()
    return DoneRecord(rows, written)


def per_target(windows: Sequence[IntentWindow]) -> tuple[
        dict[TopicPartition, int], dict[TopicPartition, list[SetDigest]],
        dict[str, tuple[tuple[int, int], ...]]]:
    """All recorded windows together: each target's start, its sets in order, the lists."""
    starts: dict[TopicPartition, int] = {}
    sets: dict[TopicPartition, list[SetDigest]] = {}
    lists: dict[str, tuple[tuple[int, int], ...]] = {}
    for w in windows:
        starts.update(w.starts)
        lists.update(w.lists)
        for key, s in w.sets.items():
            sets.setdefault(key, []).extend(s)
    return starts, sets, lists
