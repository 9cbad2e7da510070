"""One driver-side view of a Kafka 0.7 cluster: brokers, and (broker, partition)s per topic.

Two sources, exactly one of them per :class:`Cluster`:

``zk.connect``
    The registry (:mod:`kafka_pyspark._cluster.registry`): brokers from ``/brokers/ids/[id]``,
    partitions from ``/brokers/topics/[topic]/[id]`` (that broker's partition count). Only
    brokers that are registered in ``/brokers/ids`` contribute partitions: a topic node left by
    a broker that is gone cannot be read anyway (both nodes are ephemeral, so this is a short
    window).

``broker.list``
    Kafka 0.7's static producer format ``id:host:port[,id:host:port...]``
    (:func:`~kafka_pyspark._cluster.options.parse_broker_list`). Partition counts are found by
    probing each broker with FETCH requests of max size 0 on partitions 0, 1, ... until it
    answers WrongPartition (3)
    (:func:`kafka_pyspark.client.probe_partition_count`; not OFFSETS: a 0.7.2 broker closes the
    connection on OFFSETS for a bad partition: docs/dev/PROTOCOL.md "Measured: OFFSETS").

    Note: a 0.7 broker answers a FETCH on a topic it has never seen with error 0 for every valid
    partition (docs/dev/PROTOCOL.md "Measured: FETCH"), so for an unknown topic the probe reports
    the broker's default partition count (``num.partitions``, or its ``topic.partition.count.map``
    entry), not an empty list. That is also exactly where 0.7 would put the topic's first messages.
    Listing topics needs the registry.
"""

from __future__ import annotations

from kafka_pyspark._cluster.options import BrokerAddress, ClusterOptions
from kafka_pyspark._cluster.registry import Registry
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._wire.topics import validate_topic_name
from kafka_pyspark.client._brokers import BrokerConnections, ConnectionSettings
from kafka_pyspark.errors import OptionError

__all__ = ["BrokerAddress", "Cluster"]


class Cluster(Closing):
    """Brokers and per-topic (broker, partition) lists, from ZooKeeper or ``broker.list``.

    ``options`` come parsed and checked (:mod:`kafka_pyspark._cluster.options`: from Spark's
    options or, for Python callers, :func:`~kafka_pyspark._cluster.options.cluster_options`).
    Nothing is contacted until a method needs it; :meth:`close` (or the context manager) ends
    the ZooKeeper session and closes probe connections.
    """

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        self._registry: Registry | None = None
        self._static: dict[int, BrokerAddress] | None = None
        if options.zk_connect is not None:
            self._registry = Registry.from_options(options)
        else:
            assert options.broker_list is not None
            self._static = {b.id: b for b in options.broker_list}
        #: the probe connections (``broker.list``), one per broker
        self._conns = BrokerConnections(
            {b.id: (b.host, b.port) for b in options.broker_list or ()},
            ConnectionSettings(timeout=options.socket_timeout_ms / 1000.0,
                               buffer_size=options.socket_buffer_size))

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._conns.close()
        if self._registry is not None:
            self._registry.close()

    def __repr__(self) -> str:
        if self._registry is not None:
            return f"Cluster(zk_connect={self._registry.zk_connect!r})"
        brokers = ",".join(str(b) for b in (self._static or {}).values())
        return f"Cluster(broker_list={brokers!r})"

    # --- queries -----------------------------------------------------------------------------

    def registry(self) -> Registry | None:
        """The ZooKeeper registry (None in ``broker.list`` mode)."""
        return self._registry

    def brokers(self) -> dict[int, BrokerAddress]:
        """{id: address} of the live brokers (registry) or the configured ones, sorted by id."""
        if self._registry is None:
            assert self._static is not None
            return dict(self._static)
        return {b.id: b.address for b in self._registry.brokers().values()}

    def topics(self) -> list[str]:
        """Topic names in the registry, sorted. ZooKeeper mode only."""
        if self._registry is None:
            raise OptionError(
                "zk.connect",
                "listing topics (e.g. for subscribePattern) needs zk.connect; "
                "broker.list names brokers, not topics",
            )
        return self._registry.topics()

    def partitions(self, topic: str) -> list[tuple[int, int]]:
        """Sorted (broker id, partition) pairs holding ``topic``.

        Registry: ``[]`` if the topic is not registered. ``broker.list``: each broker is probed
        (see the module docstring: an unknown topic reports the broker's default count).
        """
        validate_topic_name(topic)
        if self._registry is not None:
            live = self._registry.brokers()
            counts = self._registry.topic_partitions(topic)
            from kafka_pyspark._partitioner import sorted_partitions  # numpy: only when needed

            return sorted_partitions(counts, live)
        assert self._static is not None
        out: list[tuple[int, int]] = []
        for broker_id in self._static:
            n = self.partition_count(topic, broker_id)
            out.extend((broker_id, p) for p in range(n))
        return out

    def partition_count(self, topic: str, broker_id: int) -> int:
        """One broker's partition count for ``topic``: from the registry (0 if not registered)
        or by probing (``broker.list``)."""
        validate_topic_name(topic)
        if self._registry is not None:
            return self._registry.topic_partitions(topic).get(broker_id, 0)
        from kafka_pyspark.client import probe_partition_count

        if broker_id not in self._conns:
            raise OptionError("broker.list", f"no broker with id {broker_id}")
        return int(probe_partition_count(self._conns.get(broker_id), topic))
