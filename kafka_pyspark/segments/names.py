"""How Kafka names its log directories and segment files (docs/dev/PROTOCOL.md
"Segment files"): the one definition, shared by the reader and the embedded broker's storage.

    <log dir>/<topic>-<partition>/<base offset, 20 digits><suffix>

``.kafka``: Kafka 0.7; the base offset is a byte offset. ``.log``: Kafka 0.8 and later; the
base offset is the logical offset of the first entry. Other files (``.index``,
``.timeindex``, ``.txnindex``, ``.snapshot``, ``.deleted``, ``.cleaned``, ``.swap``,
checkpoints) are not segment files.
"""

from __future__ import annotations

from typing import Literal

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


def parse_any_segment_name(name: str) -> tuple[int, SegmentKind] | None:
    """``(base offset, kind)`` named by a segment file name, or None if ``name`` is not one."""
    stem, dot, suffix = name.rpartition(".")
    kind = SUFFIX_KINDS.get(dot + suffix)
    if kind is None or not stem.isdigit() or not stem.isascii():
        return None
    return int(stem), kind


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
    """``("my-topic", 3)`` for ``my-topic-3`` (split at the last ``-``, as 0.7.2)."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or not part.isascii():
        return None
    return topic, int(part)
