"""How Kafka 0.7 names a broker-partition: the one home of the ``brokerId-partition`` key.

0.7 calls a partition of a topic on one broker ``[brokerId]-[partition]`` (``"0-1"``): in the
ZooKeeper registry (``/brokers/topics``, ``/consumers/[group]/offsets/[topic]/0-1``), in the
``startingOffsets``/``endingOffsets``/``assign`` options and in the stream offsets Spark
checkpoints. All of them format with :func:`partition_key` and parse with
:func:`parse_partition_key`, so the three agree on what a key is: ASCII decimal digits only
(no sign, no whitespace, no trailing newline, no other scripts' digits). Pure.
"""

from __future__ import annotations

import re

__all__ = ["TopicPartition", "not_a_partition_key", "parse_partition_key", "partition_key"]

TopicPartition = tuple[str, int, int]
"""``(topic, broker id, partition)``: one broker-partition log."""

# [0-9], not \d (which matches every script's digits); \Z, not $ (which also matches before
# a final newline).
_KEY = re.compile(r"([0-9]+)-([0-9]+)\Z")


def partition_key(broker: int, partition: int) -> str:
    """``"brokerId-partition"``, as 0.7 names a broker-partition (and its ZooKeeper node)."""
    return f"{broker}-{partition}"


def parse_partition_key(key: object) -> tuple[int, int] | None:
    """``"1-3"`` -> ``(1, 3)``; None for anything that is not such a key (callers raise their
    own error naming where the key came from)."""
    m = _KEY.match(key) if isinstance(key, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def not_a_partition_key(key: object) -> str:
    """The one wording of a malformed key (callers say where it came from)."""
    return f"{key!r} is not 'brokerId-partition' (e.g. '0-1', as 0.7 names broker-partitions)"
