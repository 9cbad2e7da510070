"""Which broker-partitions a read covers: from the registry or ``broker.list``.

- :func:`discover` (a batch read): subscription -> sorted ``(topic, broker, partition)`` list
  (:class:`kafka_pyspark._cluster.cluster.Cluster`); a named topic that does not exist is a
  :class:`TopicNotFoundError`, an assigned broker-partition the cluster lacks an
  :class:`OptionError`; :func:`discover_view`: that and the live brokers, from one registry
  read.
- :func:`current_partitions` (a stream, per micro-batch): the same, leniently;
  :func:`current_view`: that and the live brokers, from one registry read.
- :func:`diff_topology` / :func:`merge_topology` (a stream): how the broker-partitions now
  differ from those in the start offset, and the start offset with new ones added. Pure.
- :func:`group_offsets`: what a 0.7 consumer group committed; :func:`group_start`, the same
  for a read with ``startingOffsets=group``.

With ZooKeeper every one of them reads the registry in a fixed number of pipelined rounds,
whatever the number of topics and partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._shared.partition_key import TopicPartition, partition_key
from kafka_pyspark._spark.options import Assign, ReadOptions, Subscribe, Subscription
from kafka_pyspark.errors import (
    BrokerConnectionError,
    KafkaError,
    OptionError,
    RegistryError,
    TopicNotFoundError,
)

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster

__all__ = [
    "TopologyChange",
    "current_partitions",
    "current_view",
    "diff_topology",
    "discover",
    "discover_view",
    "group_offsets",
    "group_start",
    "merge_topology",
]

log = logging.getLogger(__name__)


def discover(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """The broker-partitions a subscription covers, sorted.

    ``subscribe``: every partition of every named topic on every live broker; a topic with
    none is a :class:`TopicNotFoundError` (ZooKeeper mode; with ``broker.list`` a 0.7 broker
    cannot tell an unknown topic from an empty one, see :mod:`kafka_pyspark._cluster.cluster`).
    ``subscribePattern``: every registered topic the pattern matches (none: an empty list).
    ``assign``: the named ones, each checked to exist.
    """
    return discover_view(cluster, subscription)[0]


def discover_view(
    cluster: Cluster, subscription: Subscription
) -> tuple[list[TopicPartition], dict[int, BrokerAddress]]:
    """:func:`discover` and the live brokers. With ZooKeeper, one
    :meth:`~kafka_pyspark._cluster.registry.Registry.topology` read: two pipelined rounds (three
    with ``subscribePattern``) whatever the number of topics; no broker registered is a
    :class:`~kafka_pyspark.errors.NoBrokersRegisteredError` saying where else a registry is."""
    registry = cluster.registry()
    if registry is None:
        return _discover_static(cluster, subscription), cluster.brokers()
    from kafka_pyspark._partitioner import sorted_partitions

    if isinstance(subscription, Subscribe):
        topics: Sequence[str] = subscription.topics
    elif isinstance(subscription, Assign):
        topics = sorted({t for t, _, _ in subscription.partitions})
    else:
        topics = [t for t in registry.topics() if subscription.allows(t)]
        if not topics:
            log.warning(
                "subscribePattern %r matches no topic in the registry", subscription.pattern
            )
    live, counts = registry.topology(topics)
    if not live:
        from kafka_pyspark._cluster import no_brokers_error

        raise no_brokers_error(registry)  # a wrong chroot, usually: say so, not "no topic"
    brokers = {b.id: b.address for b in live.values()}
    have = {t: sorted_partitions(counts[t], live) for t in topics}
    if isinstance(subscription, Assign):
        return sorted(set(_check_assigned(cluster, subscription, brokers, have))), brokers
    for topic in topics:
        if not have[topic] and isinstance(subscription, Subscribe):
            raise TopicNotFoundError(_not_found(cluster, topic))
    return sorted({(t, b, p) for t in topics for b, p in have[t]}), brokers


def _discover_static(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """:func:`discover` with ``broker.list``: every broker probed per topic."""
    if isinstance(subscription, Assign):
        return sorted(set(_check_assigned(cluster, subscription, cluster.brokers(), None)))
    if not isinstance(subscription, Subscribe):
        cluster.topics()  # raises: listing topics needs the registry
    assert isinstance(subscription, Subscribe)
    out: list[TopicPartition] = []
    for topic in subscription.topics:
        parts = cluster.partitions(topic)
        if not parts:
            raise TopicNotFoundError(_not_found(cluster, topic))
        out.extend((topic, b, p) for b, p in parts)
    return sorted(set(out))


def current_view(
    cluster: Cluster, subscription: Subscription
) -> tuple[list[TopicPartition], dict[int, BrokerAddress]]:
    """What a stream sees before a micro-batch: :func:`current_partitions` and the live
    brokers. With ZooKeeper, one :meth:`~kafka_pyspark._cluster.registry.Registry.topology` read
    (two pipelined rounds, three with ``subscribePattern``, however many topics)."""
    registry = cluster.registry()
    if registry is None:
        return current_partitions(cluster, subscription), cluster.brokers()
    from kafka_pyspark._partitioner import sorted_partitions

    if isinstance(subscription, (Assign, Subscribe)):
        topics: Sequence[str] = subscription.topics
    else:
        topics = [t for t in registry.topics() if subscription.allows(t)]
    live, counts = registry.topology(topics)
    out = {(t, b, p) for t in topics for b, p in sorted_partitions(counts[t], live)}
    if isinstance(subscription, Assign):
        out &= set(subscription.partitions)
    return sorted(out), {b.id: b.address for b in live.values()}


def current_partitions(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """The broker-partitions the subscription covers right now, leniently (sorted).

    Unlike the batch reader's :func:`discover`, nothing missing
    is an error between micro-batches: a subscribed topic that does not exist yet has no
    partitions (0.7 creates topics on their first message; they are picked up then), an
    assigned broker-partition whose broker is not registered (or, with ``broker.list``, not
    answering) is simply not current; its offset stays in the stream offset until it returns.
    """
    out: set[TopicPartition] = set()
    if cluster.registry() is not None:
        return current_view(cluster, subscription)[0]
    # broker.list (subscribePattern needs zk.connect): probe each broker; one that does not
    # answer has no current partitions
    if not isinstance(subscription, (Subscribe, Assign)):
        raise KafkaError("subscribePattern needs zk.connect")
    assigned = set(subscription.partitions) if isinstance(subscription, Assign) else None
    for topic in subscription.topics:
        for broker in sorted(cluster.brokers()):
            if assigned is not None and not any(
                t == topic and b == broker for t, b, _ in assigned
            ):
                continue
            try:
                n = cluster.partition_count(topic, broker)
            except BrokerConnectionError as e:
                log.warning(
                    "kafka07 stream: broker %d is not answering (%s); its partitions of "
                    "topic %r keep their offsets", broker, e, topic,
                )
                continue
            out.update((topic, broker, p) for p in range(n))
    if assigned is not None:
        out &= assigned
    return sorted(out)


def _not_found(cluster: Cluster, topic: str) -> str:
    where = repr(cluster)
    registry = cluster.registry()
    if registry is not None:
        from kafka_pyspark._cluster import topic_elsewhere

        return (
            f"topic {topic!r} does not exist: it has no broker-partition in the ZooKeeper "
            f"registry of {where} (no live broker has it){topic_elsewhere(registry, topic)}"
        )
    return f"topic {topic!r}: no broker of {where} has a partition of it"


def _check_assigned(
    cluster: Cluster,
    assign: Assign,
    brokers: Mapping[int, BrokerAddress],
    have: Mapping[str, Sequence[tuple[int, int]]] | None,
) -> list[TopicPartition]:
    """The assigned broker-partitions, each checked: its broker is live (registered or in
    ``broker.list``) and, with the registry (``have``: each topic's broker-partitions), it is
    registered."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, broker, partition in assign.partitions:
        by_topic.setdefault(topic, []).append((broker, partition))
    out: list[TopicPartition] = []
    for topic, wanted in sorted(by_topic.items()):
        for broker, partition in wanted:
            if broker not in brokers:
                raise OptionError(
                    "assign",
                    f"topic {topic!r} {partition_key(broker, partition)}: broker {broker} is not "
                    f"{'registered' if have is not None else 'in broker.list'} "
                    f"(known brokers: {sorted(brokers)})",
                )
        if have is not None:
            registered = set(have.get(topic, ()))
            if not registered:
                raise TopicNotFoundError(_not_found(cluster, topic))
            for broker, partition in wanted:
                if (broker, partition) not in registered:
                    raise OptionError(
                        "assign",
                        f"topic {topic!r} has no broker-partition "
                        f"{partition_key(broker, partition)} (it has: "
                        f"{', '.join(partition_key(b, p) for b, p in sorted(registered))})",
                    )
        out.extend((topic, b, p) for b, p in wanted)
    return out


def group_offsets(
    cluster: Cluster, group: str, topics: Iterable[str]
) -> dict[TopicPartition, int]:
    """The offsets consumer group ``group`` committed in ZooKeeper for ``topics``."""
    registry = cluster.registry()
    if registry is None:
        raise OptionError(
            "zk.connect", "startingOffsets=group needs zk.connect: 0.7 keeps group offsets there"
        )
    out: dict[TopicPartition, int] = {}
    for topic, (offsets, problems) in registry.group_offsets_of(group, sorted(set(topics))).items():
        if problems:
            raise RegistryError(next(iter(problems.values())))
        for (broker, partition), offset in offsets.items():
            out[(topic, broker, partition)] = offset
    return out


def group_start(
    cluster: Cluster, options: ReadOptions, tps: Sequence[TopicPartition]
) -> dict[TopicPartition, int] | None:
    """What the group committed for ``tps``' topics when ``startingOffsets=group``, else None
    (the batch reader and the stream start the same way)."""
    if options.starting.kind != "group":
        return None
    assert options.group_id is not None  # parse_read_options guarantees it
    return group_offsets(cluster, options.group_id, {t for t, _, _ in tps})


# --- a stream's topology --------------------------------------------------------------------------


@dataclass(frozen=True)
class TopologyChange:
    """How the broker-partitions known now differ from those in the start offset."""

    new: tuple[TopicPartition, ...]
    """In the registry now, not in the start offset: they start at ``earliest``."""
    missing: tuple[TopicPartition, ...]
    """In the start offset, not in the registry now (broker down, topic gone): offset kept."""


def diff_topology(
    start: Iterable[TopicPartition], current: Iterable[TopicPartition]
) -> TopologyChange:
    known = set(start)
    now = set(current)
    return TopologyChange(new=tuple(sorted(now - known)), missing=tuple(sorted(known - now)))


def merge_topology(
    start: Mapping[TopicPartition, int], earliest_of_new: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Start offsets plus every new broker-partition at its earliest offset.

    Nothing in ``start`` is ever dropped: a broker that vanished keeps its offset in the
    dict and is resumed from it when it returns. Existing entries are never overwritten.
    """
    out = dict(start)
    for tp, off in earliest_of_new.items():
        out.setdefault(tp, off)
    return out
