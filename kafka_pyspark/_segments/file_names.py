"""How Kafka names its log directories and segment files (docs/dev/PROTOCOL.md
"Segment files"): the one definition, shared by the reader and the embedded broker's storage.

    <log dir>/<topic>-<partition>/<base offset, 20 digits><suffix>

``.kafka``: Kafka 0.7; the base offset is a byte offset. ``.log``: Kafka 0.8 and later; the
base offset is the logical offset of the first entry. Other files (``.index``,
``.timeindex``, ``.txnindex``, ``.snapshot``, ``.deleted``, ``.cleaned``, ``.swap``,
checkpoints) are not segment files.
"""

from __future__ import annotations

import re
from typing import Literal

from kafka_pyspark._wire.protocol import INT32_MAX, INT64_MAX

SegmentKind = Literal["kafka07", "log"]

SEGMENT_SUFFIX = ".kafka"  # Kafka 0.7
LOG_SUFFIX = ".log"  # Kafka 0.8 and later
SEGMENT_NAME_DIGITS = 20
SUFFIX_KINDS: dict[str, SegmentKind] = {SEGMENT_SUFFIX: "kafka07", LOG_SUFFIX: "log"}
INDEX_SUFFIX = ".index"  # a .log file's offset index (Kafka 0.8 and later), same base name


def segment_file_name(base_offset: int, kind: SegmentKind = "kafka07") -> str:
    """``00000000000000000051.kafka`` for base offset 51 (``.log`` for ``kind="log"``)."""
    suffix = SEGMENT_SUFFIX if kind == "kafka07" else LOG_SUFFIX
    return f"{base_offset:0{SEGMENT_NAME_DIGITS}d}{suffix}"


#: the stem of a name shaped like a segment file's (sign included, so "-1.kafka" is one)
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _segment_shape(name: str) -> tuple[str, SegmentKind] | None:
    """``(stem, kind)`` of a name shaped like a segment file name (an integer, legal or not,
    and ``.kafka``/``.log``); None for a name of any other shape."""
    stem, dot, suffix = name.rpartition(".")
    kind = SUFFIX_KINDS.get(dot + suffix)
    return (stem, kind) if kind is not None and _INTEGER.fullmatch(stem) else None


def segment_name_problem(name: str) -> str:
    """Why ``name``, shaped like a segment file name (an integer and ``.kafka``/``.log``),
    names no legal base offset (a sign, or outside ``0..INT64_MAX``); ``""`` for a legal name
    and for a name of any other shape."""
    shape = _segment_shape(name)
    if shape is None:
        return ""
    stem = shape[0]
    if int(stem) < 0:
        return f"its base offset {stem} is negative"
    if not stem.isdigit():
        return f"its base offset {stem} has a sign"
    if int(stem) > INT64_MAX:
        return f"its base offset {stem} is larger than {INT64_MAX} (int64)"
    return ""


def is_segment_shaped(name: str) -> bool:
    """Whether ``name`` is a segment file name, legal or not (see :func:`segment_name_problem`)."""
    return _segment_shape(name) is not None


def parse_any_segment_name(name: str) -> tuple[int, SegmentKind] | None:
    """``(base offset, kind)`` named by a legal segment file name, or None if ``name`` is not
    one (:func:`segment_name_problem` says why a segment-shaped name is not legal)."""
    shape = _segment_shape(name)
    if shape is None or segment_name_problem(name):
        return None
    return int(shape[0]), shape[1]


def parse_segment_file_name(name: str) -> int | None:
    """The base offset named by a 0.7 segment file name (``.kafka``), or None."""
    parsed = parse_any_segment_name(name)
    return parsed[0] if parsed is not None and parsed[1] == "kafka07" else None


def index_path(log_path: str) -> str:
    """The offset index beside the ``.log`` file ``log_path`` (same base offset)."""
    return log_path[: -len(LOG_SUFFIX)] + INDEX_SUFFIX


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``("my-topic", 3)`` for ``my-topic-3`` (split at the last ``-``, as 0.7.2), or None if
    ``name`` is not a legal partition directory name (:func:`partition_dir_problem`: why)."""
    shape = _partition_shape(name)
    if shape is None or partition_dir_problem(name):
        return None
    return shape[0], int(shape[1])


def _partition_shape(name: str) -> tuple[str, str] | None:
    """``(topic, digits)`` of a name shaped like ``topic-partition`` (any number of ASCII
    digits after the last ``-``); None otherwise."""
    topic, sep, part = name.rpartition("-")
    return (topic, part) if sep and topic and part.isdigit() and part.isascii() else None


def partition_dir_problem(name: str) -> str:
    """Why ``name``, shaped like ``topic-partition``, names no legal partition (a partition
    id larger than ``INT32_MAX``: ids are int32 on the wire and in the ``partition`` column);
    ``""`` otherwise. A sign cannot occur: ``t--1`` is partition 1 of topic ``t-``."""
    shape = _partition_shape(name)
    if shape is not None and int(shape[1]) > INT32_MAX:
        return f"its partition {shape[1]} is larger than {INT32_MAX} (int32)"
    return ""
