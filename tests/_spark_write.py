"""Helpers of the ``df.write`` tests (tests/spark/write/): a DataFrame writer of format
``kafka07``, and what a topic holds read back with the low-level client."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from _cluster import read_log

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


Found = dict[tuple[int, int], list[tuple[Any, ...]]]  # (value, compression) per message


def read_topic(brokers: Sequence[EmbeddedBroker], topic: str) -> Found:
    """Every (value, compression) per (broker, partition), in log order."""
    return read_log(brokers, topic, "value", "compression")


def values_of(found: Found) -> Counter[bytes]:
    return Counter(v for vals in found.values() for v, _ in vals)


def writer(df: Any, zk: str, **options: str) -> Any:
    w = df.write.format("kafka07").mode("append").option("zk.connect", zk)
    for k, v in options.items():
        w = w.option(k.replace("_", "."), v)
    return w
