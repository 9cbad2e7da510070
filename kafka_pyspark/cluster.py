"""One driver-side view of a Kafka 0.7 cluster: brokers, and (broker, partition)s per topic.

Two sources, exactly one of them per :class:`Cluster`:

``zk.connect``
    The registry (:mod:`kafka_pyspark.registry`): brokers from ``/brokers/ids/[id]``, partitions
    from ``/brokers/topics/[topic]/[id]`` (that broker's partition count). Only brokers that are
    registered in ``/brokers/ids`` contribute partitions: a topic node left by a broker that is
    gone cannot be read anyway (both nodes are ephemeral, so this is a short window).

``broker.list``
    Kafka 0.7's static producer format ``id:host:port[,id:host:port...]``
    (:func:`parse_broker_list`). Partition counts are found by probing each broker with FETCH
    requests of max size 0 on partitions 0, 1, ... until it answers WrongPartition (3)
    (:func:`kafka_pyspark.client.probe_partition_count`; not OFFSETS: a 0.7.2 broker closes the
    connection on OFFSETS for a bad partition, BROKER-FACTS.md "OFFSETS").

    Note: a 0.7 broker answers a FETCH on a topic it has never seen with error 0 for every valid
    partition (BROKER-FACTS.md "FETCH"), so for an unknown topic the probe reports the broker's
    default partition count (``num.partitions``, or its ``topic.partition.count.map`` entry), not
    an empty list. That is also exactly where 0.7 would put the topic's first messages. Listing
    topics needs the registry.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka_pyspark import defaults
from kafka_pyspark._closing import Closing
from kafka_pyspark.errors import OptionError
from kafka_pyspark.registry import Registry
from kafka_pyspark.wire.protocol import INT32_MAX
from kafka_pyspark.wire.topics import validate_topic_name

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection

__all__ = ["BrokerAddress", "Cluster", "connect", "parse_broker_list"]

# id : host : port. A host may be an IPv6 literal in brackets ("[::1]"), which 0.7 itself never
# accepted but costs nothing here; the brackets are not part of the host.
_ENTRY = re.compile(r"(?P<id>[^:]*):(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:]*)):(?P<port>[^:]*)\Z")
_DIGITS = re.compile(r"[0-9]+\Z")


@dataclass(frozen=True)
class BrokerAddress:
    """A broker id and where to reach it."""

    id: int
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.id}:{host}:{self.port}"


def parse_broker_list(value: str) -> dict[int, BrokerAddress]:
    """Parse ``broker.list`` (``"id:host:port,id:host:port"``) into {id: address}, sorted by id.

    Whitespace around entries and fields is ignored. Raises ``OptionError('broker.list', ...)``
    for an empty list, an empty entry, a non-integer id, an empty host, a port outside
    1..65535, a repeated id, or two ids at the same host:port (every message would be read
    twice).
    """
    if not isinstance(value, str) or not value.strip():
        raise OptionError("broker.list", "is empty; expected 'id:host:port[,id:host:port...]'")
    out: dict[int, BrokerAddress] = {}
    where: dict[tuple[str, int], int] = {}
    for n, raw in enumerate(value.split(","), start=1):
        entry = raw.strip()
        if not entry:
            raise OptionError("broker.list", f"entry {n} is empty in {value!r}")
        m = _ENTRY.match(entry)
        if m is None:
            raise OptionError(
                "broker.list", f"entry {entry!r} is not 'id:host:port' (Kafka 0.7 producer format)"
            )
        id_text = m.group("id").strip()
        host = (m.group("v6") if m.group("v6") is not None else m.group("host") or "").strip()
        port_text = m.group("port").strip()
        if not _DIGITS.match(id_text) or int(id_text) > INT32_MAX:
            raise OptionError(
                "broker.list", f"entry {entry!r}: broker id {id_text!r} is not an integer >= 0"
            )
        if not host or any(c.isspace() for c in host):
            raise OptionError("broker.list", f"entry {entry!r}: host {host!r} is not a host name")
        if not _DIGITS.match(port_text) or not 0 < int(port_text) < 65536:
            raise OptionError(
                "broker.list", f"entry {entry!r}: port {port_text!r} is not in 1..65535"
            )
        broker_id, port = int(id_text), int(port_text)
        if broker_id in out:
            raise OptionError(
                "broker.list", f"broker id {broker_id} appears twice ({out[broker_id]}, {entry})"
            )
        other = where.get((host.lower(), port))
        if other is not None:
            raise OptionError(
                "broker.list",
                f"brokers {other} and {broker_id} are both {host}:{port}; "
                "its partitions would be read twice",
            )
        out[broker_id] = BrokerAddress(broker_id, host, port)
        where[(host.lower(), port)] = broker_id
    return dict(sorted(out.items()))


class Cluster(Closing):
    """Brokers and per-topic (broker, partition) lists, from ZooKeeper or ``broker.list``.

    Exactly one of ``zk_connect`` / ``broker_list`` (an ``OptionError`` otherwise). Nothing is
    contacted until a method needs it; :meth:`close` (or the context manager) ends the
    ZooKeeper session and closes probe connections.
    """

    def __init__(
        self,
        *,
        zk_connect: str | None = None,
        broker_list: str | None = None,
        zk_session_timeout_ms: int = defaults.ZK_SESSION_TIMEOUT_MS,
        zk_connection_timeout_ms: int = defaults.ZK_CONNECTION_TIMEOUT_MS,
        zk_auth: str | None = None,
        socket_timeout_ms: int = defaults.SOCKET_TIMEOUT_MS,
        socket_buffer_size: int = defaults.SOCKET_BUFFER_SIZE,
    ) -> None:
        if zk_connect is not None and broker_list is not None:
            raise OptionError(
                "broker.list",
                "conflicts with zk.connect: give exactly one of zk.connect / broker.list",
            )
        if zk_connect is None and broker_list is None:
            raise OptionError("zk.connect", "one of zk.connect / broker.list is required")
        for name, v in (
            ("socket.timeout.ms", socket_timeout_ms),
            ("socket.buffersize", socket_buffer_size),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise OptionError(name, f"must be a positive integer, got {v!r}")
        self.socket_timeout_ms = socket_timeout_ms
        self.socket_buffer_size = socket_buffer_size
        self._registry: Registry | None = None
        self._static: dict[int, BrokerAddress] | None = None
        if zk_connect is not None:
            self._registry = Registry(
                zk_connect,
                session_timeout_ms=zk_session_timeout_ms,
                connection_timeout_ms=zk_connection_timeout_ms,
                auth=zk_auth,
            )
        else:
            assert broker_list is not None
            self._static = parse_broker_list(broker_list)
        self._conns: dict[int, BrokerConnection] = {}
        self._lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
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
        return {
            b.id: BrokerAddress(b.id, b.host, b.port) for b in self._registry.brokers().values()
        }

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
            from kafka_pyspark.partitioner import sorted_partitions  # numpy: only when needed

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

        return int(probe_partition_count(self._connection(broker_id), topic))

    def _connection(self, broker_id: int) -> BrokerConnection:
        assert self._static is not None
        address = self._static.get(broker_id)
        if address is None:
            raise OptionError("broker.list", f"no broker with id {broker_id}")
        with self._lock:
            conn = self._conns.get(broker_id)
            if conn is None:
                conn = self._conns[broker_id] = connect(
                    broker_id, address, self.socket_timeout_ms, self.socket_buffer_size
                )
            return conn


def connect(
    broker_id: int, address: BrokerAddress, socket_timeout_ms: int, socket_buffer_size: int
) -> BrokerConnection:
    """A connection to one broker with the cluster options' socket settings."""
    from kafka_pyspark.client import BrokerConnection

    return BrokerConnection(
        address.host,
        address.port,
        timeout=socket_timeout_ms / 1000.0,
        buffer_size=socket_buffer_size,
        broker_id=broker_id,
    )
