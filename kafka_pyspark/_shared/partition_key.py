"""How Kafka 0.7 names a broker-partition: the one home of the ``brokerId-partition`` key.

0.7 calls a partition of a topic on one broker ``[brokerId]-[partition]`` (``"0-1"``): in the
ZooKeeper registry (``/brokers/topics``, ``/consumers/[group]/offsets/[topic]/0-1``), in the
``startingOffsets``/``endingOffsets``/``assign`` options and in the stream offsets Spark
checkpoints. All of them format with :func:`partition_key` and parse with
:func:`parse_partition_key`, so the three agree on what a key is: ASCII decimal digits only
(no sign, no whitespace, no trailing newline, no other scripts' digits). Also the one check
of a consumer group id (:func:`check_group_id`), a ZooKeeper node name under ``/consumers``.
Pure.
"""

from __future__ import annotations

import re

from kafka_pyspark.errors import OptionError

__all__ = [
    "TopicPartition",
    "check_group_id",
    "describe_tp",
    "is_decimal",
    "not_a_partition_key",
    "parse_partition_key",
    "partition_key",
]

TopicPartition = tuple[str, int, int]
"""``(topic, broker id, partition)``: one broker-partition log."""

# [0-9], not \d (which matches every script's digits); \Z, not $ (which also matches before
# a final newline).
_KEY = re.compile(r"([0-9]+)-([0-9]+)\Z")
_DECIMAL = re.compile(r"[0-9]+\Z")
# characters ZooKeeper refuses in a node name (PathUtils.validatePath): it checks UTF-16 code
# units, so a character outside the Basic Multilingual Plane (a surrogate pair) is refused too
_ZK_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\U0010ffff]")


def is_decimal(text: str) -> bool:
    """True for ASCII decimal digits only, as 0.7 writes broker ids and partition numbers in
    ZooKeeper node names and ``broker.list`` (no sign, no whitespace, no other scripts' digits)."""
    return _DECIMAL.match(text) is not None


def partition_key(broker: int, partition: int) -> str:
    """``"brokerId-partition"``, as 0.7 names a broker-partition (and its ZooKeeper node)."""
    return f"{broker}-{partition}"


def describe_tp(tp: TopicPartition) -> str:
    """How messages name one broker-partition log: ``topic 't', broker 1, partition 3``."""
    topic, broker, partition = tp
    return f"topic {topic!r}, broker {broker}, partition {partition}"


def parse_partition_key(key: object) -> tuple[int, int] | None:
    """``"1-3"`` -> ``(1, 3)``; None for anything that is not such a key (callers raise their
    own error naming where the key came from)."""
    m = _KEY.match(key) if isinstance(key, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def not_a_partition_key(key: object) -> str:
    """The one wording of a malformed key (callers say where it came from)."""
    return f"{key!r} is not 'brokerId-partition' (e.g. '0-1', as 0.7 names broker-partitions)"


def check_group_id(value: object, option: str = "group.id") -> str:
    """``value`` if it can name a consumer group: one ZooKeeper node under ``/consumers`` (not
    empty, not ``.``/``..``, no ``/``, no character ZooKeeper refuses, which includes any
    outside the Basic Multilingual Plane); else
    :class:`OptionError` naming ``option``."""
    if (
        not isinstance(value, str)
        or value in ("", ".", "..")
        or "/" in value
        or _ZK_FORBIDDEN.search(value)
    ):
        raise OptionError(
            option,
            f"{value!r} is not a legal group id (a ZooKeeper node name: not empty, '.' or '..', "
            "no '/', control characters or characters outside Unicode's Basic Multilingual "
            "Plane such as emoji)",
        )
    return value
