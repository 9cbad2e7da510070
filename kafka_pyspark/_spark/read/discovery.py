"""Which broker-partitions a read covers: from the registry or ``broker.list``.

- :func:`discover`: the one way a read looks at the cluster (through
  :class:`~.offset_reader.OffsetReader`, batch and stream alike): subscription -> sorted
  ``(topic, broker, partition)`` list and the live brokers. ``strict`` (a batch read): a named
  topic that does not exist is a :class:`TopicNotFoundError`, an assigned broker-partition the
  cluster lacks an :class:`OptionError`, a broker that does not answer its error. Otherwise (a
  stream, between micro-batches) nothing missing is an error.
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

from kafka_pyspark._options import Assign, ReadOptions, Subscribe, Subscription
from kafka_pyspark._shared.partition_key import TopicPartition, partition_key
from kafka_pyspark.errors import (
    BrokerConnectionError,
    OptionError,
    RegistryError,
    TopicNotFoundError,
)

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster

__all__ = [
    "TopologyChange",
    "View",
    "diff_topology",
    "discover",
    "group_offsets",
    "group_start",
    "merge_topology",
]

log = logging.getLogger(__name__)

View = tuple[list[TopicPartition], dict[int, "BrokerAddress"]]
"""Broker-partitions (sorted) and live brokers, as the cluster lists them."""

# each looked-at topic's (broker, partition)s on the live brokers
_Have = Mapping[str, Sequence[tuple[int, int]]]


def discover(
    cluster: Cluster, subscription: Subscription, *, strict: bool, first: bool = True
) -> View:
    """The broker-partitions ``subscription`` covers now (sorted) and the live brokers.

    ``subscribe``: every partition of every named topic on every live broker;
    ``subscribePattern``: of every registered topic the pattern matches; ``assign``: the named
    ones the cluster has. With ZooKeeper one
    :meth:`~kafka_pyspark._cluster.registry.Registry.topology` read (two pipelined rounds, three
    with ``subscribePattern``) whatever the number of topics; with ``broker.list`` each broker is
    probed per topic (see :mod:`kafka_pyspark._cluster`: a 0.7 broker cannot tell an unknown
    topic from an empty one).

    ``first`` (a read's first look): no broker registered is a
    :class:`~kafka_pyspark.errors.NoBrokersRegisteredError` saying where else a registry is (a
    wrong chroot must not read silently nothing). ``strict`` (a batch read): a subscribed topic
    with no partition is a :class:`TopicNotFoundError`, an assigned broker-partition that is not
    there an :class:`OptionError`, a ``broker.list`` broker that does not answer its
    :class:`BrokerConnectionError`. Otherwise (a stream between micro-batches) a topic that
    does not exist yet has no partitions (0.7 creates topics on their first message), an
    assigned broker-partition whose broker is not registered (or, with ``broker.list``, not
    answering: warned) is simply not current; its offset stays in the stream offset.
    """
    if isinstance(subscription, (Subscribe, Assign)):
        topics: Sequence[str] = subscription.topics
    else:  # listing topics needs the registry: Cluster.topics says so with broker.list
        topics = [t for t in cluster.topics() if subscription.allows(t)]
        if strict and not topics:
            log.warning(
                "subscribePattern %r matches no topic in the registry", subscription.pattern
            )
    registry = cluster.registry()
    if registry is None:
        brokers = cluster.brokers()
        have = _probe(cluster, subscription, topics, strict)
    else:
        from kafka_pyspark._partitioner import sorted_partitions

        live, counts = registry.topology(topics)
        if first and not live:
            from kafka_pyspark._cluster import no_brokers_error

            raise no_brokers_error(registry)  # a wrong chroot, usually: say so, not "no topic"
        brokers = {b.id: b.address for b in live.values()}
        have = {t: sorted_partitions(counts[t], live) for t in topics}
    if strict:
        _check(cluster, subscription, brokers, have)
    out = {(t, b, p) for t in topics for b, p in have[t]}
    if isinstance(subscription, Assign):
        out &= set(subscription.partitions)
    return sorted(out), brokers


def _probe(
    cluster: Cluster, subscription: Subscription, topics: Sequence[str], strict: bool
) -> dict[str, list[tuple[int, int]]]:
    """``broker.list``: each topic's partitions on each broker (only the assigned brokers of
    an ``assign``), probed. A broker that does not answer raises when ``strict``, else it has
    no current partitions of that topic (warned)."""
    assigned: dict[str, set[int]] | None = None
    if isinstance(subscription, Assign):
        assigned = {}
        for t, b, _ in subscription.partitions:
            assigned.setdefault(t, set()).add(b)
    have: dict[str, list[tuple[int, int]]] = {}
    for topic in topics:
        have[topic] = []
        for broker in sorted(cluster.brokers()):
            if assigned is not None and broker not in assigned.get(topic, ()):
                continue
            try:
                n = cluster.partition_count(topic, broker)
            except BrokerConnectionError as e:
                if strict:
                    raise
                log.warning(
                    "kafka07 stream: broker %d is not answering (%s); its partitions of "
                    "topic %r keep their offsets", broker, e, topic,
                )
                continue
            have[topic].extend((broker, p) for p in range(n))
    return have


def _check(
    cluster: Cluster,
    subscription: Subscription,
    brokers: Mapping[int, BrokerAddress],
    have: _Have,
) -> None:
    """What a batch read may not lack (:func:`discover` with ``strict``)."""
    if isinstance(subscription, Assign):
        _check_assigned(cluster, subscription, brokers, have)
        return
    for topic, found in have.items():
        if not found and isinstance(subscription, Subscribe):
            raise TopicNotFoundError(_not_found(cluster, topic))


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
    cluster: Cluster, assign: Assign, brokers: Mapping[int, BrokerAddress], have: _Have
) -> None:
    """Each assigned broker-partition: its broker is live (registered or in ``broker.list``)
    and it is there (registered; with ``broker.list``, the broker answers for it)."""
    registered = cluster.registry() is not None
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, broker, partition in assign.partitions:
        by_topic.setdefault(topic, []).append((broker, partition))
    for topic, wanted in sorted(by_topic.items()):
        for broker, partition in wanted:
            if broker not in brokers:
                raise OptionError(
                    "assign",
                    f"topic {topic!r} {partition_key(broker, partition)}: broker {broker} is not "
                    f"{'registered' if registered else 'in broker.list'} "
                    f"(known brokers: {sorted(brokers)})",
                )
        found = set(have.get(topic, ()))
        if registered and not found:
            raise TopicNotFoundError(_not_found(cluster, topic))
        for broker, partition in wanted:
            if (broker, partition) in found:
                continue
            if not registered:
                raise OptionError(
                    "assign", f"broker {broker} has no partition {partition} of topic {topic!r}"
                )
            raise OptionError(
                "assign",
                f"topic {topic!r} has no broker-partition {partition_key(broker, partition)} "
                f"(it has: {', '.join(partition_key(b, p) for b, p in sorted(found))})",
            )


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
