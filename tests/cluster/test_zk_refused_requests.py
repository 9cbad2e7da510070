"""A session's server refuses ``multi``/``multiRead`` though the ``srvr`` probe said it has
them (an older member behind a VIP during a rolling upgrade; the probe, on a connection of its
own, reached a newer one): the session falls back to one request per node for the rest of its
life, so commits, grouped reads and a stream go on. The refusing server is
``_zk_proxy.RefusingProxy`` in front of the real ZooKeeper."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _zk_proxy import MULTI, MULTI_READ, RefusingProxy

from kafka_pyspark._cluster import Registry
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._spark.compat import ReadAllAvailable
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark.client import Producer
from kafka_pyspark.testing._zookeeper import ZooKeeperServer
from kafka_pyspark.testing.broker import EmbeddedBroker

# the real server behind the proxy has both (its srvr says so, and the session believes it)
pytestmark = [pytest.mark.zk, pytest.mark.zk_needs("multi", "multiRead")]


@pytest.fixture
def proxy(zookeeper: ZooKeeperServer) -> Iterator[RefusingProxy]:
    host, port = zookeeper.connect_string.rsplit(":", 1)
    with RefusingProxy((host, int(port))) as refusing:
        yield refusing


@pytest.fixture
def through(proxy: RefusingProxy, zk_connect: str) -> str:
    """``zk_connect``'s chroot, reached through the refusing proxy."""
    return proxy.address + "/" + zk_connect.split("/", 1)[1]


def test_commits_and_grouped_reads_go_one_node_per_request_once_refused(
    proxy: RefusingProxy, through: str, kz: Any
) -> None:
    first = {"a": {(b, p): 100 * b + p for b in range(3) for p in range(4)},
             "b": {(0, 0): 5, (0, 1): 6}}
    then = {t: {key: offset + 7 for key, offset in offsets.items()}
            for t, offsets in first.items()}
    with Registry(through) as registry:
        registry.commit_group_offsets_of("g", first, creator="c")  # creates: a refused multi
        assert proxy.refused == [MULTI]
        registry.commit_group_offsets_of("g", then, creator="c")  # writes: never in a multi
        read = registry.group_offsets_of("g", ["a", "b"])  # a refused multiRead, then nodes
        again = registry.group_offsets_of("g", ["a", "b"])  # never in a multiRead
    assert proxy.refused == [MULTI, MULTI_READ]  # each refused once: not sent again
    assert read == again == {t: (offsets, {}) for t, offsets in then.items()}
    # as 0.7 writes them, read straight from the real ZooKeeper
    assert kz.get("/consumers/g/offsets/a/2-3")[0] == b"210"
    assert kz.get("/consumers/g/offsets/b/0-1")[0] == b"13"
    assert kz.get("/consumers/g")[0] == b"c"


def test_a_stream_rides_out_a_server_without_multi(
    proxy: RefusingProxy, through: str, broker: EmbeddedBroker, kz: Any
) -> None:
    topic = f"r{uuid.uuid4().hex[:8]}"
    with Producer({0: (broker.host, broker.port)}, timeout=10.0) as producer:
        for partition in (0, 1):
            producer.send(0, topic, partition, encode_message_set([b"x", b"y"]))
        producer.flush()
    broker.wait_for_topic(topic)
    size = broker.log_end(topic, 0)
    options = {"zk.connect": through, "subscribe": topic, "group.id": "grp"}
    stream = Kafka07StreamReader({**options, "startingOffsets": "earliest",
                                  "commitToGroup": "true"}, READ_SCHEMA)
    start = stream.initialOffset()
    end = stream.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0-0": size, "0-1": size}}
    stream.commit(end)  # the group commit: its writes would go in one multi
    assert stream.latestOffset(end, ReadAllAvailable()) == end
    stream.stop()
    assert kz.get(f"/consumers/grp/offsets/{topic}/0-1")[0] == str(size).encode()
    resumed = Kafka07StreamReader({**options, "startingOffsets": "group"}, READ_SCHEMA)
    assert resumed.initialOffset() == end  # the group's offsets: a grouped read
    resumed.stop()
    # refused once per session: the stream's (its first topology read, its commit), then the
    # resumed reader's
    assert proxy.refused == [MULTI_READ, MULTI, MULTI_READ]
