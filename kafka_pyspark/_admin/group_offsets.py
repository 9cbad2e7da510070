"""A consumer group's committed offsets across topics in one JSON shape: what 0.7's
``ExportZkOffsets`` / ``ImportZkOffsets`` move, as ``kafka07 group-offsets --export`` prints it,
``--import`` takes it and ``lag --json`` includes it (``"offsets"``)::

    {"group": "etl", "offsets": {"events": {"0-0": 1234, "0-1": 17}, "clicks": {"1-0": 0}}}

``offsets`` mirrors 0.7's nodes ``/consumers/[group]/offsets/[topic]/[brokerId]-[partition]``
(and is the shape of a stream's checkpointed offsets); one topic's object is what
``group-offsets --topic T --offsets`` takes. Parsing is separate from reading ZooKeeper.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka_pyspark._admin.lag import NothingCommittedError
from kafka_pyspark._shared.partition_key import parse_partition_key, partition_key
from kafka_pyspark._wire.protocol import INT64_MAX
from kafka_pyspark.errors import OffsetFormatError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Registry

__all__ = ["GroupOffsets", "committed_offsets", "offsets_document", "parse_offsets_document",
           "parse_topic_offsets"]

#: {topic: {(broker, partition): offset}}
GroupOffsets = dict[str, dict[tuple[int, int], int]]


def offsets_document(group: str, offsets: Mapping[str, Mapping[tuple[int, int], int]]
                     ) -> dict[str, Any]:
    """The shape above, topics and broker-partitions sorted."""
    return {"group": group, "offsets": {
        t: {partition_key(*k): offsets[t][k] for k in sorted(offsets[t])}
        for t in sorted(offsets)}}


def parse_topic_offsets(value: object, where: str) -> dict[tuple[int, int], int]:
    """One topic's ``{"brokerId-partition": offset, ...}`` (not empty); ``where`` names it in
    errors (:class:`~kafka_pyspark.errors.OffsetFormatError`)."""
    if not isinstance(value, dict) or not value:
        raise OffsetFormatError(
            f'{where} must be a JSON object {{"brokerId-partition": offset, ...}}')
    out: dict[tuple[int, int], int] = {}
    for name, offset in value.items():
        key = parse_partition_key(name)
        if key is None:
            raise OffsetFormatError(f"{where}: {name!r} is not brokerId-partition (e.g. \"0-1\")")
        if isinstance(offset, bool) or not isinstance(offset, int) or \
                not 0 <= offset <= INT64_MAX:
            raise OffsetFormatError(f"{where}: {name}: {offset!r} is not a byte offset (an "
                                    f"integer 0..{INT64_MAX})")
        out[key] = offset
    return out


def parse_offsets_document(text: str, where: str) -> tuple[str, GroupOffsets]:
    """The group and the offsets of a document in the shape above (``where``: the file, in
    errors)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise OffsetFormatError(f"{where} is not JSON: {e}") from None
    if not isinstance(doc, dict) or set(doc) != {"group", "offsets"}:
        raise OffsetFormatError(f'{where} must be a JSON object {{"group": ..., "offsets": '
                                '{topic: {"brokerId-partition": offset, ...}, ...}}')
    group, topics = doc["group"], doc["offsets"]
    if not isinstance(group, str) or not group:
        raise OffsetFormatError(f"{where}: group must be a group id (a string), got {group!r}")
    if not isinstance(topics, dict) or not topics:
        raise OffsetFormatError(f"{where}: offsets must be a JSON object of topics, not empty")
    return group, {t: parse_topic_offsets(v, f"{where}: topic {t!r}") for t, v in topics.items()}


def committed_offsets(registry: Registry, group: str, topics: Sequence[str] | None
                      ) -> tuple[GroupOffsets, dict[str, dict[str, str]]]:
    """What ``group`` committed for ``topics`` (None: every topic it committed for), in two
    pipelined ZooKeeper rounds, and per topic the nodes not in 0.7's format ({node: error}).
    :class:`NothingCommittedError` when it committed nothing there."""
    names = list(topics) if topics else registry.group_topics(group)
    found = registry.group_offsets_of(group, names) if names else {}
    offsets = {t: committed for t, (committed, _) in found.items() if committed}
    malformed = {t: bad for t, (_, bad) in found.items() if bad}
    if not offsets and not malformed:
        what = f" for {', '.join(map(repr, names))}" if topics else ""
        raise NothingCommittedError(f"group {group!r} has no committed offsets{what}")
    return offsets, malformed
