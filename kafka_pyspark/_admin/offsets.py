"""What the brokers' logs hold, as table rows (``kafka07 offsets``, ``lag``, ``group-offsets``).

Every broker is asked at the same time under its own deadline (:func:`ask_each`, over the one
fan-out :class:`~kafka_pyspark.client._brokers.BrokerPool`): a hung or unreachable broker
becomes its error, the other brokers' answers are still given. Each broker's OFFSETS requests
are pipelined on its connection (:func:`~kafka_pyspark.client._offsets.segment_starts_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kafka_pyspark.client._brokers import (
    BrokerConnections,
    BrokerPool,
    ConnectionSettings,
    answer_deadline_ms,
)
from kafka_pyspark.errors import BrokerConnectionError, KafkaError, TopicNotFoundError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster
    from kafka_pyspark.client import BrokerConnection

__all__ = [
    "OffsetsRow", "ask_each", "broker_offsets", "broker_offsets_of", "by_broker", "live_brokers",
    "offsets_requests", "partition_offsets", "registered_partitions",
]

_R = TypeVar("_R")
Key = tuple[int, int]


def live_brokers(cluster: Cluster) -> dict[int, BrokerAddress]:
    """The brokers; none registered is the Spark paths' error, saying where a registry is (a
    wrong chroot, usually: :mod:`kafka_pyspark._cluster.chroot_hints`)."""
    brokers = cluster.brokers()
    registry = cluster.registry()
    if not brokers and registry is not None:  # broker.list is never empty
        from kafka_pyspark._cluster import no_brokers_error

        raise no_brokers_error(registry)
    return brokers


def registered_partitions(cluster: Cluster, topic: str) -> list[Key]:
    """Sorted (broker, partition) pairs of a topic; :class:`TopicNotFoundError` if none."""
    parts = cluster.partitions(topic)
    if not parts:
        raise TopicNotFoundError(f"topic {topic!r} is not registered in ZooKeeper")
    return parts


def by_broker(keys: Iterable[Key]) -> dict[int, list[int]]:
    """``(broker, partition)`` keys as {broker: [partition, ...]}, both sorted."""
    out: dict[int, list[int]] = {}
    for b, p in sorted(keys):
        out.setdefault(b, []).append(p)
    return out


def ask_each(
    brokers: Mapping[int, BrokerAddress],
    work: Callable[[BrokerConnection, int], _R],
    timeout_ms: int,
    requests: Mapping[int, int] | None = None,
) -> tuple[dict[int, _R], dict[int, KafkaError]]:
    """``work(connection, broker_id)`` for every broker at once, each with its own connection
    (socket timeout ``timeout_ms``, no retries: a hung or unreachable broker costs one
    timeout, not four). A broker that fails, or has not finished within
    :func:`~kafka_pyspark.client._brokers.answer_deadline_ms` for the ``requests`` it is asked
    (default 1), gets its error; the others are unaffected."""
    settings = ConnectionSettings(timeout=timeout_ms / 1000.0, retries=0)
    conns = BrokerConnections({b: (a.host, a.port) for b, a in brokers.items()}, settings)

    def run(broker: int, _: None) -> _R:
        conn = conns.get(broker)
        try:
            return work(conn, broker)
        except OSError as e:
            if isinstance(e, KafkaError):
                raise
            raise BrokerConnectionError(f"{conn.address}: {e}") from e

    deadlines = {b: answer_deadline_ms(timeout_ms, (requests or {}).get(b, 1)) for b in brokers}
    with BrokerPool(conns) as pool:
        done, failed = pool.each(dict.fromkeys(brokers), run, deadlines)
    for error in failed.values():
        if not isinstance(error, KafkaError):
            raise error
    return done, {b: e for b, e in failed.items() if isinstance(e, KafkaError)}


# --- OFFSETS -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetsRow:
    """One broker-partition's log bounds (``kafka07 offsets``), or why they are not known."""

    broker: int
    partition: int | None  # None: the whole broker failed before its partitions were known
    earliest: int | None = None
    latest: int | None = None
    error: str | None = None


def broker_offsets(
    conn: BrokerConnection, topic: str, partitions: list[int] | None
) -> list[tuple[int, int, int]]:
    """``(partition, earliest, latest)`` of each partition, the requests pipelined."""
    from kafka_pyspark.client import probe_partition_count

    if partitions is None:  # broker.list: probe, as the reader does
        partitions = list(range(probe_partition_count(conn, topic)))
    return broker_offsets_of(conn, {topic: partitions})[topic]


def broker_offsets_of(
    conn: BrokerConnection, partitions: Mapping[str, list[int]]
) -> dict[str, list[tuple[int, int, int]]]:
    """:func:`broker_offsets` of several topics ({topic: partitions}), all the requests
    pipelined in one call: one per partition, its segment starts and log end (the oldest
    start is what OFFSETS earliest answers), so a broker answers half as many requests as
    asking earliest and latest apart. A lost connection raises."""
    from kafka_pyspark.client._offsets import segment_starts_of

    found, error = segment_starts_of(conn, [(t, p) for t, ps in partitions.items() for p in ps])
    if error is not None:
        raise error
    out: dict[str, list[tuple[int, int, int]]] = {}
    at = 0  # found is in the order asked: each topic's partitions in turn
    for t, ps in partitions.items():
        out[t] = [(p, s.earliest, s.end) for p, s in zip(ps, found[at:at + len(ps)], strict=True)]
        at += len(ps)
    return out


def offsets_requests(partitions: Mapping[int, list[int]]) -> dict[int, int]:
    """OFFSETS requests per broker of :func:`broker_offsets` (for its deadline)."""
    return {b: len(ps) for b, ps in partitions.items()}


def partition_offsets(cluster: Cluster, topic: str, timeout_ms: int) -> list[OffsetsRow]:
    """Earliest and latest offset of every broker-partition of ``topic``."""
    brokers = live_brokers(cluster)
    known: dict[int, list[int]] | None = None
    if cluster.registry() is not None:
        known = by_broker(registered_partitions(cluster, topic))
        brokers = {b: a for b, a in brokers.items() if b in known}
    answers, failed = ask_each(
        brokers,
        lambda conn, b: broker_offsets(conn, topic, None if known is None else known[b]),
        timeout_ms,
        None if known is None else offsets_requests(known),
    )
    rows: list[OffsetsRow] = []
    for b in sorted(brokers):
        if b in failed:
            parts: list[int | None] = list(known[b]) if known is not None else [None]
            rows.extend(OffsetsRow(b, p, error=str(failed[b])) for p in parts)
        else:
            rows.extend(OffsetsRow(b, p, lo, hi) for p, lo, hi in answers[b])
    return rows
