"""A stream offset as Spark checkpoints it: the JSON offset dict, written and parsed. Pure.

Offset format (what Spark checkpoints, JSON)::

    {"topic": {"brokerId-partition": byteOffset, ...}, ...}

``byteOffset`` is the next byte to read in that broker-partition's log (always a message
boundary). Topics and keys are emitted in a fixed order (topics by name, keys by
``(broker, partition)`` numerically) so two equal offsets always serialise to the same JSON:
Spark compares offsets as JSON strings, and an unstable order would run empty micro-batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_pyspark._shared.partition_key import TopicPartition, not_a_partition_key, partition_key
from kafka_pyspark._shared.partition_key import parse_partition_key as _parse_key
from kafka_pyspark.errors import OffsetFormatError

__all__ = ["OffsetDicts", "Offsets", "from_offset_dict", "parse_partition_key", "to_offset_dict"]

Offsets = dict[TopicPartition, int]


def parse_partition_key(key: str, *, topic: str = "?") -> tuple[int, int]:
    """``"1-3"`` -> ``(1, 3)``; anything else is an :class:`OffsetFormatError`.

    The key format is :mod:`kafka_pyspark._shared.partition_key` (ASCII digits only, as the options
    accept). Checkpoints written by earlier versions parse the same: they were written with
    ``partition_key`` (ASCII digits from ``int``), never with a newline or other digits.
    """
    parsed = _parse_key(key)
    if parsed is None:
        raise OffsetFormatError(
            f"topic {topic!r}: key {not_a_partition_key(key)}"
        )
    return parsed


def to_offset_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{(t, b, p): o}`` -> ``{"t": {"b-p": o}}`` in the canonical (sorted) order."""
    out: dict[str, dict[str, int]] = {}
    for topic, broker, partition in sorted(offsets):
        out.setdefault(topic, {})[partition_key(broker, partition)] = int(
            offsets[(topic, broker, partition)]
        )
    return out


def from_offset_dict(value: Any) -> Offsets:
    """Parse an offset dict (from Spark's checkpoint or our own output), strictly.

    Every offset must be a non-negative integer: symbolic values (-1 latest, -2 earliest) are
    only meaningful in ``startingOffsets`` and never appear in a stream offset.
    """
    if not isinstance(value, Mapping):
        raise OffsetFormatError(f"stream offset must be a JSON object, got {value!r}")
    out: Offsets = {}
    for topic, parts in value.items():
        if not isinstance(topic, str) or not isinstance(parts, Mapping):
            raise OffsetFormatError(
                f"stream offset: expected {{topic: {{'brokerId-partition': offset}}}}, "
                f"got {topic!r}: {parts!r}"
            )
        for key, off in parts.items():
            broker, partition = parse_partition_key(key, topic=topic)
            if isinstance(off, bool) or not isinstance(off, int) or off < 0:
                raise OffsetFormatError(
                    f"stream offset for topic {topic!r} broker-partition {key}: "
                    f"{off!r} is not a byte offset (a non-negative integer)"
                )
            out[(topic, broker, partition)] = off
    return out


class OffsetDicts:
    """Offset dicts parsed and made by one stream reader, remembering the last few it made.

    Spark hands a stream back the offsets it was given (a micro-batch starts where the last
    one ended), so parsing one of those is a comparison, not a parse of every entry; and a
    new offset that has the same broker-partitions as one made before is that one with the
    entries that moved patched in (in place: the canonical order is kept). A stream over many
    broker-partitions of which few move then pays per micro-batch for C-level dict copies and
    comparisons, not for formatting and parsing every key. Results are fresh dicts either way.
    """

    def __init__(self, keep: int = 4) -> None:
        self._keep = keep
        self._made: list[tuple[dict[str, dict[str, int]], Offsets]] = []  # newest last

    def parse(self, value: Any) -> Offsets:
        """:func:`from_offset_dict` of ``value``."""
        for made, offsets in reversed(self._made):
            if value == made:
                return dict(offsets)
        return from_offset_dict(value)

    def make(self, offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
        """:func:`to_offset_dict` of ``offsets``."""
        offsets = dict(offsets)
        out: dict[str, dict[str, int]] | None = None
        for i in range(len(self._made) - 1, -1, -1):
            made, known = self._made[i]
            if known.keys() != offsets.keys():
                continue
            moved = [(tp, off) for tp, off in offsets.items() if known[tp] != off]
            if not moved:  # the same offset again: it becomes the newest remembered
                self._made.append(self._made.pop(i))
                return {topic: dict(parts) for topic, parts in made.items()}
            out = {topic: dict(parts) for topic, parts in made.items()}
            for (topic, broker, partition), off in moved:
                out[topic][partition_key(broker, partition)] = int(off)
            break
        if out is None:
            out = to_offset_dict(offsets)
        self._made = [*self._made[-(self._keep - 1):], (out, offsets)]
        return {topic: dict(parts) for topic, parts in out.items()}
