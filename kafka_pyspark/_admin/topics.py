"""Every registered topic with its partitions per broker (``kafka07 topics`` renders it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._admin.offsets import live_brokers
from kafka_pyspark.errors import OptionError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Cluster

__all__ = ["TopicRow", "topic_overview"]


@dataclass(frozen=True)
class TopicRow:
    topic: str
    #: broker id -> partition count, as registered (``/brokers/topics/[topic]/[id]``)
    partitions: dict[int, int]
    #: broker ids above that are not live (no ``/brokers/ids/[id]``): not readable now
    not_live: tuple[int, ...]

    @property
    def live_partitions(self) -> int:
        return sum(n for b, n in self.partitions.items() if b not in self.not_live)


def topic_overview(cluster: Cluster) -> tuple[dict[int, str], list[TopicRow]]:
    """Live brokers (id -> host:port) and every registered topic's partitions per broker."""
    registry = cluster.registry()
    if registry is None:
        raise OptionError("zk.connect", "listing topics needs it: broker.list names brokers, "
                          "not topics")
    brokers = live_brokers(cluster)
    rows = []
    for topic in cluster.topics():
        counts = registry.topic_partitions(topic)
        gone = tuple(b for b in counts if b not in brokers)
        rows.append(TopicRow(topic, counts, gone))
    return {b: f"{a.host}:{a.port}" for b, a in brokers.items()}, rows
