"""Driver side of a read: which broker-partitions, and which byte offsets in each.

Three steps, each usable on its own (the streaming reader uses them per micro-batch):

- :func:`discover`: subscription -> ``(topic, broker, partition)`` list, from the registry or
  ``broker.list`` (:class:`kafka_pyspark.cluster.Cluster`); a named topic that does not exist is
  a :class:`TopicNotFoundError`.
- :class:`OffsetLookup`: OFFSETS requests, one connection per broker: the log bounds (earliest,
  latest and every segment start, in one request) and ``startingTimestamp`` lookups.
- :func:`resolve_starts` / :func:`resolve_ends`: the pure part, turning the options'
  :class:`OffsetSpec` into byte offsets with the bounds, checking them, and applying
  ``failOnDataLoss``.

Offset semantics (Kafka 0.7; seed 003 "Offsets"). Offsets are byte positions. ``latest`` is the
flushed log end, the offset the next message will get. ``earliest`` is the start of the oldest
segment still on disk. ``startingTimestamp`` uses OFFSETS with ``time = ts`` and max 1: the start
of the newest segment last modified before ``ts`` (or the log end when the whole log is older);
if no segment is that old, the earliest offset. 0.7 keeps no per-message time, so this reads
everything written at or after ``ts`` plus possibly older messages of that one segment.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark._closing import Closing
from kafka_pyspark.cluster_options import ClusterOptions
from kafka_pyspark.errors import (
    BrokerConnectionError,
    KafkaError,
    OptionError,
    TopicNotFoundError,
    data_loss_error,
    data_loss_skipped,
)
from kafka_pyspark.names import TopicPartition
from kafka_pyspark.spark.options import (
    Assign,
    OffsetSpec,
    Subscribe,
    Subscription,
    canonical_name,
)
from kafka_pyspark.wire.protocol import OFFSETS_EARLIEST, OFFSETS_LATEST

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection
    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.cluster_options import BrokerAddress

__all__ = [
    "LogBounds",
    "OffsetLookup",
    "current_partitions",
    "describe_tp",
    "discover",
    "group_offsets",
    "resolve_ends",
    "resolve_starts",
]

log = logging.getLogger(__name__)

def describe_tp(tp: TopicPartition) -> str:
    topic, broker, partition = tp
    return f"topic {topic!r}, broker {broker}, partition {partition}"


@dataclass(frozen=True)
class LogBounds:
    """What OFFSETS says about one broker-partition log."""

    earliest: int
    latest: int
    segment_starts: tuple[int, ...] = ()  # ascending, every one < latest

    def boundaries(self) -> tuple[int, ...]:
        """Offsets known to be message boundaries: segment starts and the end."""
        return (*self.segment_starts, self.latest)


# --- discovery --------------------------------------------------------------------------------


def discover(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """The broker-partitions a subscription covers, sorted.

    ``subscribe``: every partition of every named topic on every live broker; a topic with
    none is a :class:`TopicNotFoundError` (ZooKeeper mode; with ``broker.list`` a 0.7 broker
    cannot tell an unknown topic from an empty one, see :mod:`kafka_pyspark.cluster`).
    ``subscribePattern``: every registered topic the pattern matches (none: an empty list).
    ``assign``: the named ones, each checked to exist.
    """
    out: list[TopicPartition] = []
    if isinstance(subscription, Subscribe):
        for topic in subscription.topics:
            parts = cluster.partitions(topic)
            if not parts:
                raise TopicNotFoundError(_not_found(cluster, topic))
            out.extend((topic, b, p) for b, p in parts)
    elif isinstance(subscription, Assign):
        out.extend(_check_assigned(cluster, subscription))
    else:
        topics = [t for t in cluster.topics() if subscription.allows(t)]
        if not topics:
            log.warning(
                "subscribePattern %r matches no topic in the registry", subscription.pattern
            )
        for topic in topics:
            out.extend((topic, b, p) for b, p in cluster.partitions(topic))
    return sorted(set(out))


def current_partitions(cluster: Cluster, subscription: Subscription) -> list[TopicPartition]:
    """The broker-partitions the subscription covers right now, leniently (sorted).

    Unlike the batch reader's :func:`~kafka_pyspark.spark.offsets.discover`, nothing missing
    is an error between micro-batches: a subscribed topic that does not exist yet has no
    partitions (0.7 creates topics on their first message; they are picked up then), an
    assigned broker-partition whose broker is not registered (or, with ``broker.list``, not
    answering) is simply not current; its offset stays in the stream offset until it returns.
    """
    out: set[TopicPartition] = set()
    if cluster.registry() is not None:
        if isinstance(subscription, Assign):
            topics: Sequence[str] = subscription.topics
        elif isinstance(subscription, Subscribe):
            topics = subscription.topics
        else:
            topics = [t for t in cluster.topics() if subscription.allows(t)]
        for topic in topics:
            out.update((topic, b, p) for b, p in cluster.partitions(topic))
        if isinstance(subscription, Assign):
            out &= set(subscription.partitions)
        return sorted(out)
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
    if cluster.registry() is not None:
        return (
            f"topic {topic!r} does not exist: it has no broker-partition in the ZooKeeper "
            f"registry of {where} (no live broker has it)"
        )
    return f"topic {topic!r}: no broker of {where} has a partition of it"


def _check_assigned(cluster: Cluster, assign: Assign) -> list[TopicPartition]:
    brokers = cluster.brokers()
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, broker, partition in assign.partitions:
        by_topic.setdefault(topic, []).append((broker, partition))
    out: list[TopicPartition] = []
    for topic, wanted in sorted(by_topic.items()):
        for broker, _ in wanted:
            if broker not in brokers:
                raise OptionError(
                    "assign",
                    f"topic {topic!r} {broker}-{wanted[0][1]}: broker {broker} is not "
                    f"{'registered' if cluster.registry() is not None else 'in broker.list'} "
                    f"(known brokers: {sorted(brokers)})",
                )
        if cluster.registry() is not None:
            have = set(cluster.partitions(topic))
            if not have:
                raise TopicNotFoundError(_not_found(cluster, topic))
            for broker, partition in wanted:
                if (broker, partition) not in have:
                    raise OptionError(
                        "assign",
                        f"topic {topic!r} has no broker-partition {broker}-{partition} "
                        f"(it has: {', '.join(f'{b}-{p}' for b, p in sorted(have))})",
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
    for topic in sorted(set(topics)):
        for (broker, partition), offset in registry.group_offsets(group, topic).items():
            out[(topic, broker, partition)] = offset
    return out


# --- OFFSETS lookups --------------------------------------------------------------------------


class OffsetLookup(Closing):
    """Driver-side OFFSETS requests: one lazily opened connection per broker. Context manager.

    Ask only about broker-partitions that exist (from :func:`discover`): a 0.7.2 broker closes
    the connection instead of answering OFFSETS for a partition it does not have.
    """

    def __init__(self, brokers: Mapping[int, BrokerAddress], options: ClusterOptions) -> None:
        self._brokers = dict(brokers)
        self._options = options
        self._conns: dict[int, BrokerConnection] = {}

    def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()

    def connection(self, broker: int) -> BrokerConnection:
        from kafka_pyspark.cluster import connect

        conn = self._conns.get(broker)
        if conn is None:
            address = self._brokers.get(broker)
            if address is None:
                raise TopicNotFoundError(
                    f"broker {broker} is not known (live brokers: {sorted(self._brokers)})"
                )
            conn = self._conns[broker] = connect(
                broker,
                address,
                self._options.socket_timeout_ms,
                self._options.socket_buffer_size,
            )
        return conn

    def bounds(self, tp: TopicPartition) -> LogBounds:
        """Earliest, latest and the segment starts, from one OFFSETS (latest, many) request."""
        from kafka_pyspark.client import segment_starts

        topic, broker, partition = tp
        got = segment_starts(self.connection(broker), topic, partition)
        earliest = got.starts[0] if got.starts else got.end
        return LogBounds(earliest, got.end, tuple(got.starts))

    def all_bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        return {tp: self.bounds(tp) for tp in tps}

    def before_time(self, tp: TopicPartition, time_ms: int) -> int | None:
        """0.7's offset "before" ``time_ms`` (see the module docstring); None if none."""
        from kafka_pyspark.client import before_time

        topic, broker, partition = tp
        return before_time(self.connection(broker), topic, partition, time_ms)

    def check_partition(self, tp: TopicPartition) -> bool:
        """Whether the broker has this partition (FETCH max 0: WrongPartition means no)."""
        from kafka_pyspark.errors import WrongPartitionError

        topic, broker, partition = tp
        resp = self.connection(broker).fetch(topic, partition, 0, 0)
        return resp.error != WrongPartitionError.code


# --- resolution (pure) ------------------------------------------------------------------------


def _check_named(option: str, spec: OffsetSpec, tps: Sequence[TopicPartition]) -> None:
    known = set(tps)
    for tp in sorted(spec.offsets):
        if tp not in known:
            topic, broker, partition = tp
            raise OptionError(
                option,
                f"names topic {topic!r} {broker}-{partition}, which the cluster does not have "
                f"(it has: {', '.join(f'{b}-{p}' for t, b, p in sorted(known) if t == topic)})",
            )


def _data_loss(
    option: str,
    tp: TopicPartition,
    offset: int,
    bounds: LogBounds,
    fail: bool,
    origin: str,
) -> None:
    where = describe_tp(tp)
    if offset < bounds.earliest:
        what = (
            f"{where}: {origin} offset {offset} is no longer on the broker (earliest is "
            f"{bounds.earliest}; {bounds.earliest - offset} bytes deleted by retention)"
        )
    else:
        what = (
            f"{where}: {origin} offset {offset} is past the log end {bounds.latest} "
            "(the log was truncated or recreated)"
        )
    if fail:
        raise data_loss_error(
            f"{canonical_name(option)}: {what}",
            "read from the earliest available offset instead",
        )
    log.warning("%s", data_loss_skipped(
        what, f"reading from the earliest offset {bounds.earliest} instead"))


def resolve_starts(
    spec: OffsetSpec,
    tps: Sequence[TopicPartition],
    bounds: Mapping[TopicPartition, LogBounds],
    *,
    fail_on_data_loss: bool = True,
    committed: Mapping[TopicPartition, int] | None = None,
    before_time: Callable[[TopicPartition, int], int | None] | None = None,
    option: str = "startingOffsets",
    known: Sequence[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """Start offset per broker-partition.

    ``committed``: the group's offsets (``spec.kind == "group"``; partitions it never
    committed start at the earliest). ``before_time``: OFFSETS with a time
    (``spec.kind == "timestamp"``; None -> earliest). An explicit (JSON) offset past the log
    end is an :class:`OptionError`; any start before the earliest offset (or a committed
    offset past the end) is data loss: :class:`DataLossError`, or with
    ``fail_on_data_loss=False`` a warning and the earliest offset. JSON offsets must name
    broker-partitions in ``known`` (default ``tps``; pass every discovered one when ``tps`` is
    a filtered subset).
    """
    _check_named(option, spec, tps if known is None else known)
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        b = bounds[tp]
        kind = spec.kind
        if kind == "earliest":
            out[tp] = b.earliest
        elif kind == "latest":
            out[tp] = b.latest
        elif kind == "timestamp":
            if before_time is None or spec.timestamp is None:
                raise ValueError("startingTimestamp needs before_time")
            out[tp] = _timestamp_start(before_time(tp, spec.timestamp), b)
        elif kind == "group":
            out[tp] = _group_start(option, tp, (committed or {}).get(tp), b, fail_on_data_loss)
        else:
            out[tp] = _given_start(option, tp, spec, b, fail_on_data_loss)
    return out


def _timestamp_start(found: int | None, b: LogBounds) -> int:
    """OFFSETS' answer for a time, clamped into the log (no answer: the earliest offset)."""
    return b.earliest if found is None else min(max(found, b.earliest), b.latest)


def _group_start(option: str, tp: TopicPartition, offset: int | None, b: LogBounds,
                 fail_on_data_loss: bool) -> int:
    """The group's committed offset; never committed: earliest; outside the log: data loss."""
    if offset is None:
        return b.earliest
    if b.earliest <= offset <= b.latest:
        return offset
    _data_loss(option, tp, offset, b, fail_on_data_loss, "the group's committed")
    return b.earliest


def _given_start(option: str, tp: TopicPartition, spec: OffsetSpec, b: LogBounds,
                 fail_on_data_loss: bool) -> int:
    """A JSON start: the named offset (or -2/-1), else the spec's default for the rest."""
    value = spec.offsets.get(tp)
    if value is None:
        return b.earliest if spec.default == "earliest" else b.latest
    if value == OFFSETS_EARLIEST:
        return b.earliest
    if value == OFFSETS_LATEST:
        return b.latest
    if value > b.latest:
        raise OptionError(
            option, f"{describe_tp(tp)}: offset {value} is past the log end {b.latest}"
        )
    if value < b.earliest:
        _data_loss(option, tp, value, b, fail_on_data_loss, "the requested")
        return b.earliest
    return value


def resolve_ends(
    spec: OffsetSpec,
    tps: Sequence[TopicPartition],
    bounds: Mapping[TopicPartition, LogBounds],
    starts: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool = True,
    option: str = "endingOffsets",
    known: Sequence[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """End offset (exclusive) per broker-partition; never before its start.

    ``latest`` (the default) is the flushed log end at planning time: the read is a snapshot.
    A JSON end past the log end, or before the start, is an :class:`OptionError`; an end
    before the earliest offset means the whole range was deleted (data loss, as for starts;
    with ``fail_on_data_loss=False`` the range is empty). ``known``: as for
    :func:`resolve_starts`.
    """
    _check_named(option, spec, tps if known is None else known)
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        b = bounds[tp]
        start = starts[tp]
        value = spec.offsets.get(tp) if spec.kind == "specific" else None
        if spec.kind == "latest" or value is None or value == OFFSETS_LATEST:
            end = b.latest
        elif value == OFFSETS_EARLIEST:
            end = b.earliest
        elif value > b.latest:
            raise OptionError(
                option, f"{describe_tp(tp)}: offset {value} is past the log end {b.latest}"
            )
        elif value < b.earliest:
            if fail_on_data_loss:
                raise data_loss_error(
                    f"endingOffsets: {describe_tp(tp)}: offset {value} is before the earliest "
                    f"offset {b.earliest}: the whole range was deleted by retention",
                    "skip it",
                )
            log.warning("%s: endingOffsets %d is before the earliest offset %d; nothing to read",
                        describe_tp(tp), value, b.earliest)
            end = start
        else:
            end = value
        if end < start:
            raise OptionError(
                option,
                f"{describe_tp(tp)}: end {end} is before the start {start} "
                f"({'latest' if value is None or value == OFFSETS_LATEST else 'as given'})",
            )
        out[tp] = end
    return out
