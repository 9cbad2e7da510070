"""The one discovery path (``_spark/read/discovery.py``) and the offset reader over it
(``_spark/read/offset_reader.py``), against a real broker and ZooKeeper: a batch read's strict
look and a stream's lenient one find the same broker-partitions and differ only in what is an
error."""

from __future__ import annotations

import pickle

import pytest
from _cluster import send

from kafka_pyspark._cluster import Cluster, cluster_options
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._options import Assign, Subscribe, parse_read_options
from kafka_pyspark._spark.read.discovery import discover
from kafka_pyspark._spark.read.offset_reader import OffsetReader
from kafka_pyspark.errors import (
    BrokerConnectionError,
    NoBrokersRegisteredError,
    OptionError,
    TopicNotFoundError,
)
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk

T0, T1 = ("t", 0, 0), ("t", 0, 1)


@pytest.fixture
def topic_t(broker: EmbeddedBroker) -> EmbeddedBroker:
    """Topic ``t`` on broker 0 (two partitions), one message in partition 1."""
    send(broker, "t", 1, encode_message_set([b"one"]))
    return broker


def test_strict_and_lenient_discovery_with_zookeeper(topic_t: EmbeddedBroker,
                                                     zk_connect: str) -> None:
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster:
        sub = Subscribe(("t",))
        tps, brokers = discover(cluster, sub, strict=True)
        assert (tps, sorted(brokers)) == ([T0, T1], [0])
        assert discover(cluster, sub, strict=False) == (tps, brokers)
        later = Subscribe(("t", "later"))  # a topic 0.7 creates on its first message
        with pytest.raises(TopicNotFoundError, match="'later' does not exist"):
            discover(cluster, later, strict=True)
        assert discover(cluster, later, strict=False)[0] == [T0, T1]
        odd = Assign((T1, ("t", 0, 7)))
        with pytest.raises(OptionError, match="has no broker-partition 0-7"):
            discover(cluster, odd, strict=True)
        assert discover(cluster, odd, strict=False)[0] == [T1]
        gone = Assign((("t", 5, 0),))
        with pytest.raises(OptionError, match="broker 5 is not registered"):
            discover(cluster, gone, strict=True)
        assert discover(cluster, gone, strict=False) == ([], brokers)


def test_no_registered_broker_fails_only_a_first_look(zk_connect: str) -> None:
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster:
        for strict in (True, False):
            with pytest.raises(NoBrokersRegisteredError):
                discover(cluster, Subscribe(("t",)), strict=strict)
        # a stream whose brokers are all away between micro-batches: nothing current
        assert discover(cluster, Subscribe(("t",)), strict=False, first=False) == ([], {})


def test_strict_and_lenient_discovery_with_broker_list(topic_t: EmbeddedBroker) -> None:
    b = topic_t
    options = cluster_options(broker_list=f"0:{b.host}:{b.port},3:127.0.0.1:1",
                              socket_timeout_ms=2000)
    with Cluster(options) as cluster:
        odd = Assign((T1, ("t", 0, 5)))
        with pytest.raises(OptionError, match="broker 0 has no partition 5 of topic 't'"):
            discover(cluster, odd, strict=True)
        assert discover(cluster, odd, strict=False)[0] == [T1]
        # broker 3 does not answer: a batch read fails, a stream goes on without it
        with pytest.raises(BrokerConnectionError, match=r"127\.0\.0\.1:1\b"):
            discover(cluster, Subscribe(("t",)), strict=True)
        assert discover(cluster, Subscribe(("t",)), strict=False)[0] == [T0, T1]


def test_offset_reader_asks_when_asked_and_pickles_fresh(topic_t: EmbeddedBroker,
                                                         zk_connect: str) -> None:
    options = parse_read_options({"zk.connect": zk_connect, "subscribe": "t"}, "batch")
    with OffsetReader(options) as offsets:
        assert (offsets.known, offsets.latest()) == (None, None)
        tps, brokers = offsets.view()
        assert offsets.known == (tps, brokers) and tps == [T0, T1]
        bounds = offsets.all_bounds(tps)
        assert offsets.latest() == {T0: 0, T1: bounds[T1].latest} and bounds[T1].latest > 0
        assert offsets.addresses_for({0}) == {0: (topic_t.host, topic_t.port)}
        fresh = pickle.loads(pickle.dumps(offsets))
        assert type(fresh) is OffsetReader
        assert (fresh.known, fresh.latest(), fresh.segment_starts()) == (None, None, {})
