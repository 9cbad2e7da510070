"""The driver's side of a write: the parsed options and columns and a cluster view resolved into
a picklable :class:`WritePlan` that Spark ships to every write task (``kafka07 produce`` hands
it to its one :class:`~kafka_pyspark._write.task.TaskWriter`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._cluster import ClusterOptions
from kafka_pyspark._options.write_columns import ColumnLayout
from kafka_pyspark._options.write_options import WriteOptions
from kafka_pyspark._partitioner import sorted_partitions
from kafka_pyspark._wire import validate_topic_name
from kafka_pyspark.errors import BrokerConnectionError, TopicNameError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Cluster


#: what a failed delivery's error says happens next, in a Spark job (at-least-once)
SPARK_RETRY_NOTE = (
    "Spark retries the task; the retry writes its rows again (at-least-once: duplicates "
    "possible, nothing silently lost)"
)
#: the same with ``delivery.guarantee=exactly-once``
SPARK_EXACTLY_ONCE_RETRY_NOTE = (
    "Spark retries the task; the retry reads back what this attempt's recorded message sets "
    "left in Kafka and sends only the rest (exactly-once: nothing twice, nothing lost)"
)


@dataclass(frozen=True)
class WritePlan:
    """Everything a write task needs, resolved on the driver (picklable)."""

    options: WriteOptions
    #: the cluster options as parsed on the driver; ZooKeeper credentials only when tasks keep
    #: exactly-once records in ZooKeeper (kept out of reprs); in ``broker.list`` mode tasks
    #: probe the topics the driver did not resolve (``topic`` column) with them
    cluster: ClusterOptions
    layout: ColumnLayout
    brokers: dict[int, tuple[str, int]]
    #: topic -> sorted (broker, partition) list; empty tuple: known not to be registered
    topics: dict[str, tuple[tuple[int, int], ...]]
    connect_retries: int = 3
    connect_backoff: float = 0.2
    #: the last sentence of a failed delivery's error (another caller has no Spark retry)
    retry_note: str = SPARK_RETRY_NOTE

    def new_topic_partitions(self) -> tuple[tuple[int, int], ...]:
        """Partition 0 of every live broker (docs/dev/PROTOCOL.md "New topics")."""
        return tuple(sorted_partitions(dict.fromkeys(self.brokers, 1), self.brokers))


def resolve_plan(
    cluster: Cluster, wopts: WriteOptions, layout: ColumnLayout, copts: ClusterOptions
) -> WritePlan:
    """The plan for one write job (or one micro-batch) from a cluster view."""
    brokers = {b: (a.host, a.port) for b, a in cluster.brokers().items()}
    registry = cluster.registry()
    if not brokers and registry is not None:
        from kafka_pyspark._cluster import no_brokers_error

        raise no_brokers_error(registry)  # where the brokers are when it is a wrong chroot
    if not brokers:
        raise BrokerConnectionError(
            f"no live brokers registered in {cluster!r}: nothing to write to"
        )
    topics: dict[str, tuple[tuple[int, int], ...]] = {}
    if layout.topic is not None and registry is not None:
        # Rows name their topics: resolve every registered topic now, so that all tasks route
        # a topic's keys over the same list, and any other topic is known to be new.
        for topic in cluster.topics():
            try:
                validate_topic_name(topic)
            except TopicNameError:
                continue  # not writable by name anyway
            topics[topic] = tuple(sorted_partitions(registry.topic_partitions(topic), brokers))
    if wopts.topic is not None and wopts.topic not in topics:
        topics[wopts.topic] = tuple(
            (b, p) for b, p in cluster.partitions(wopts.topic) if b in brokers
        )
    return WritePlan(
        options=wopts,
        cluster=copts if _tasks_use_zookeeper(wopts) else dataclasses.replace(copts, zk_auth=None),
        layout=layout,
        brokers=brokers,
        topics=topics,
        retry_note=SPARK_EXACTLY_ONCE_RETRY_NOTE if wopts.delivery.exactly_once
        else SPARK_RETRY_NOTE,
    )


def _tasks_use_zookeeper(wopts: WriteOptions) -> bool:
    """Whether write tasks keep exactly-once records in ZooKeeper (with the credentials)."""
    return wopts.delivery.exactly_once and wopts.delivery.store is None
