"""Shared helpers of the tests against the embedded cluster: a kazoo session (the tests play a
0.7.2 broker or consumer in ZooKeeper with it), reading a topic back with the low-level client
(never through the Spark read path under test), sending to it with the client, an independent
reference of where Kafka 0.7's ``DefaultPartitioner`` sends a key, a registered broker that
never answers, and an embedded broker's session ended from outside.
"""

from __future__ import annotations

import contextlib
import socket
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient

if TYPE_CHECKING:
    from pyspark.sql.datasource import InputPartition

    from kafka_pyspark._spark.read.planning import Kafka07InputPartition
    from kafka_pyspark.testing.broker import EmbeddedBroker

BrokerPartition = tuple[int, int]
IO_TIMEOUT = 10.0


def kazoo_client(connect: str, **options: Any) -> KazooClient:
    """A started kazoo session on ``connect`` (``host:port[/chroot]``), every wait bounded by
    ``IO_TIMEOUT``; the caller stops and closes it (the ``kz`` fixture does)."""
    client = KazooClient(hosts=connect, timeout=IO_TIMEOUT, **options)
    client.start(timeout=IO_TIMEOUT)
    return client


def expire_broker_session(broker: EmbeddedBroker, connect: str) -> None:
    """End an embedded broker's ZooKeeper session from outside (ZooKeeper stays up): open the
    same session elsewhere and close it. Its ephemeral nodes go; it registers again on a new
    session."""
    registrar = broker._zk
    assert registrar is not None  # the broker registers in ZooKeeper
    session_id, password = registrar._client.client_id
    thief = kazoo_client(connect, client_id=(session_id, password))
    thief.stop()
    thief.close()


@contextlib.contextmanager
def silent_peer() -> Iterator[int]:
    """A loopback port (yielded) that accepts connections and never answers: the kernel
    completes the TCP handshake, nobody reads."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        port: int = srv.getsockname()[1]
        yield port


@contextlib.contextmanager
def unanswering_broker(zk_connect: str, broker_id: int, topic: str = "t") -> Iterator[int]:
    """Broker ``broker_id`` registered with one partition of ``topic`` at a
    :func:`silent_peer` port (yielded)."""
    with silent_peer() as port:
        zk = kazoo_client(zk_connect)
        try:
            zk.create(f"/brokers/ids/{broker_id}", f"h-{broker_id}:127.0.0.1:{port}".encode(),
                      makepath=True)
            zk.create(f"/brokers/topics/{topic}/{broker_id}", b"1", makepath=True)
            yield port
        finally:
            zk.stop()
            zk.close()


def kafka_partitions(parts: Iterable[InputPartition]) -> list[Kafka07InputPartition]:
    """``parts`` as a reader of ours plans them: each one must be a ``Kafka07InputPartition``."""
    from kafka_pyspark._spark.read.planning import Kafka07InputPartition

    out: list[Kafka07InputPartition] = []
    for p in parts:
        assert isinstance(p, Kafka07InputPartition), p
        out.append(p)
    return out


def read_log(
    brokers: Sequence[Any], topic: str, *columns: str
) -> dict[BrokerPartition, list[tuple[Any, ...]]]:
    """``columns`` (of the message schema) of every message of ``topic``, per ``(broker id,
    partition)`` in log order, from offset 0 to the log end; partitions without a message
    are left out."""
    from kafka_pyspark.client import BrokerConnection, iter_range, latest

    out: dict[BrokerPartition, list[tuple[Any, ...]]] = {}
    for b in brokers:
        with BrokerConnection(b.host, b.port, timeout=IO_TIMEOUT) as conn:
            for p in range(b.partitions_for(topic)):
                end = latest(conn, topic, p)
                got: list[tuple[Any, ...]] = []
                for res in iter_range(conn, topic, p, 0, end):
                    got += zip(*(res.batch.column(c).to_pylist() for c in columns), strict=True)
                if got:
                    out[(b.broker_id, p)] = got
    return out


def read_topic(brokers: Sequence[Any], topic: str) -> dict[BrokerPartition, list[bytes]]:
    """Every value of ``topic`` per ``(broker id, partition)``, in log order."""
    return {bp: [v for (v,) in rows] for bp, rows in read_log(brokers, topic, "value").items()}


def send(broker: EmbeddedBroker, topic: str, partition: int, message_set: bytes) -> None:
    """``message_set`` produced to one partition of ``broker``, delivered (the producer's
    barrier) and the topic registered."""
    from kafka_pyspark.client import Producer

    with Producer({broker.broker_id: (broker.host, broker.port)}, timeout=10.0) as p:
        p.send(broker.broker_id, topic, partition, message_set)
        p.flush()
    broker.wait_for_topic(topic)


def values(prefix: str, n: int, size: int = 30) -> list[bytes]:
    """``n`` distinct values ``<prefix>00000...`` padded with dots to ``size`` bytes."""
    return [f"{prefix}{i:05d}".encode().ljust(size, b".") for i in range(n)]


def count_values(found: Mapping[BrokerPartition, Iterable[bytes]]) -> Counter[bytes]:
    """The values of :func:`read_topic`'s answer as a multiset (where they landed forgotten)."""
    return Counter(v for vals in found.values() for v in vals)


def java_hash(s: str) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, int32 wrap), a loop independent of
    ``kafka_pyspark._partitioner``."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_index(key: str, n: int) -> int:
    """0.7 ``DefaultPartitioner``: ``Math.abs(key.hashCode) % n`` with Java semantics
    (``Math.abs(Integer.MIN_VALUE)`` stays negative, ``%`` keeps the dividend's sign)."""
    h = java_hash(key)
    a = h if h == -(2**31) else abs(h)
    r = abs(a) % n
    return -r if a < 0 else r


#: three 7-byte values: 17 bytes each as magic-1 messages (4 + 1 + 1 + 4 + 7), log end 51
THREE = [b"a" * 7, b"b" * 7, b"c" * 7]


def produce_direct(
    broker: EmbeddedBroker, topic: str, partition: int, values: list[bytes], codec: str = "none"
) -> None:
    """``values`` as one message set on one connection, confirmed by its barrier (no producer,
    no wait for the topic's registration)."""
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark.client import BrokerConnection

    with BrokerConnection(broker.host, broker.port, timeout=10.0) as conn:
        conn.produce(topic, partition, encode_message_set(values, compression=codec))
        conn.barrier(topic, partition)
