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

from kafka_pyspark.errors import OffsetFormatError
from kafka_pyspark.names import TopicPartition, not_a_partition_key, partition_key
from kafka_pyspark.names import parse_partition_key as _parse_key

__all__ = ["Offsets", "from_offset_dict", "parse_partition_key", "to_offset_dict"]

Offsets = dict[TopicPartition, int]


def parse_partition_key(key: str, *, topic: str = "?") -> tuple[int, int]:
    """``"1-3"`` -> ``(1, 3)``; anything else is an :class:`OffsetFormatError`.

    The key format is :mod:`kafka_pyspark.names` (ASCII digits only, as the options accept).
    Checkpoints written by earlier versions parse the same: they were written with
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
