"""Looking at a Kafka 0.7 cluster from a notebook or a script (public: ``kafka_pyspark``
re-exports these), and the rows ``kafka07`` shows: :mod:`.offsets` (log bounds per
broker-partition, every broker asked at once), :mod:`.lag` (a group's lag rows and totals).

    topic_partitions(zk_connect, topic, *, options=None) -> [(broker, partition), ...]
    partition_for_key(key, partitions) -> (broker, partition)
    group_lag(zk_connect, group, topics=None, *, options=None) -> [{...}, ...]

``options`` takes any other cluster option by the name the data source takes (``zk.auth``,
``zk.sessiontimeout.ms``, ``zk.connectiontimeout.ms``, ``socket.timeout.ms``,
``socket.buffersize``: docs/reading.md "Options"), checked by the same rules, so a notebook
passes the strings it gives ``spark.read``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from kafka_pyspark.errors import InvalidPartitionError, OptionError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Cluster

__all__ = ["group_lag", "partition_for_key", "topic_partitions"]

#: how long one broker may take to answer the OFFSETS requests of :func:`group_lag`
LAG_TIMEOUT_MS = 10_000


def _cluster(zk_connect: str, options: Mapping[str, str] | None) -> Cluster:
    from kafka_pyspark._cluster import CLUSTER_NAMES, Cluster, parse_cluster_options

    given = dict(options or {})
    for name in given:
        if name.lower() not in CLUSTER_NAMES or name.lower() in ("zk.connect", "broker.list"):
            raise OptionError(name, "is not a cluster option here (zk.connect is an argument); "
                              f"known: {', '.join(CLUSTER_NAMES[2:])}")
    return Cluster(parse_cluster_options({**given, "zk.connect": zk_connect}))


def topic_partitions(
    zk_connect: str, topic: str, *, options: Mapping[str, str] | None = None
) -> list[tuple[int, int]]:
    """The topic's (broker id, partition) pairs on live brokers, as registered in ZooKeeper,
    sorted by broker id then partition: the list a 0.7 producer, and the ``kafka07`` writer,
    index a key's hash into. ``[]`` when the topic is not registered."""
    with _cluster(zk_connect, options) as cluster:
        return cluster.partitions(topic)


def partition_for_key(
    key: str | bytes, partitions: Sequence[tuple[int, int]]
) -> tuple[int, int]:
    """The (broker id, partition) that a row with this ``key`` is written to: the ``kafka07``
    writer's hash partitioning, which for a string key is 0.7's Java ``DefaultPartitioner``
    (``abs(key.hashCode) % len(partitions)``; docs/writing.md "Where a row goes").

    ``partitions`` is the sorted list :func:`topic_partitions` returns. Raises
    :class:`InvalidPartitionError` for a key whose Java hash is ``Integer.MIN_VALUE`` (0.7's
    producer refuses it, and so does the writer) and ``ValueError`` for an empty list.
    """
    import pyarrow as pa

    from kafka_pyspark._partitioner import hash_partitions

    if not partitions:
        raise ValueError("partition_for_key: no partitions (is the topic registered?)")
    keys = pa.array([key], pa.string() if isinstance(key, str) else pa.binary())
    index = int(hash_partitions(keys, len(partitions))[0])
    if index < 0:
        raise InvalidPartitionError(
            f"key {key!r}: its Java hash is Integer.MIN_VALUE, which 0.7's partitioner "
            "cannot place")
    broker, partition = partitions[index]
    return broker, partition


def group_lag(
    zk_connect: str,
    group: str,
    topics: Sequence[str] | None = None,
    *,
    options: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """How far 0.7 consumer group ``group`` is behind, one dict per broker-partition, exactly
    the rows of ``kafka07 lag --json`` (docs/cli.md "lag"), among them ``broker``,
    ``partition``, ``offset`` (committed; None if never), ``earliest``, ``latest``, ``lag``
    (bytes), ``status`` and ``error``. ``topics`` None: every topic the group committed
    offsets for.

    Raises :class:`RegistryError` when ZooKeeper has no brokers (a chroot hint), the group
    committed nothing and no topic is named, or a named topic is neither registered nor
    committed.
    """
    from kafka_pyspark._admin.lag import group_lag as lag_rows

    with _cluster(zk_connect, options) as cluster:
        rows = lag_rows(cluster, group, list(topics) if topics else None, LAG_TIMEOUT_MS)
    return [asdict(r) for r in rows]
