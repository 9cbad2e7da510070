"""_cluster/cluster.py (and _cluster/options.py: broker.list parsing, the checks of the cluster
options),
and Cluster over ZooKeeper and over probed brokers."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any

import pytest
from _bytes import message
from kazoo.client import KazooClient

from kafka_pyspark._cluster import (
    BrokerAddress,
    Cluster,
    Registry,
    cluster_options,
    parse_broker_list,
)
from kafka_pyspark.errors import KafkaError, OptionError, TopicNameError

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


# --- parse_broker_list (pure) --------------------------------------------------------------


def test_parse_broker_list_0_7_producer_format() -> None:
    assert parse_broker_list("0:127.0.0.1:9092,1:broker1.example.com:6667") == {
        0: BrokerAddress(0, "127.0.0.1", 9092),
        1: BrokerAddress(1, "broker1.example.com", 6667),
    }


def test_parse_broker_list_sorted_by_id_and_whitespace_tolerant() -> None:
    brokers = parse_broker_list(" 5 : h5 : 1 ,\t2:h2:65535 ")
    assert list(brokers) == [2, 5]
    assert brokers[5] == BrokerAddress(5, "h5", 1)
    assert brokers[2] == BrokerAddress(2, "h2", 65535)


def test_parse_broker_list_ipv6_in_brackets() -> None:
    assert parse_broker_list("3:[::1]:9092") == {3: BrokerAddress(3, "::1", 9092)}
    assert str(BrokerAddress(3, "::1", 9092)) == "3:[::1]:9092"
    assert str(BrokerAddress(0, "h", 1)) == "0:h:1"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("0:h:1,", "entry 2 is empty"),
        ("0:h:1,,1:g:2", "entry 2 is empty"),
        ("0:h", "not 'id:host:port'"),
        ("h:1", "not 'id:host:port'"),
        ("0:h:1:2", "not 'id:host:port'"),
        ("a:h:1", "broker id 'a'"),
        ("-1:h:1", "broker id '-1'"),
        ("99999999999:h:1", "broker id"),
        ("0::1", "host ''"),
        ("0:h h:1", "host"),
        ("0:h:0", "port '0'"),
        ("0:h:65536", "port '65536'"),
        ("0:h:-1", "port '-1'"),
        ("0:h:x", "port 'x'"),
        ("0:h:", "port ''"),
        ("0:h:1,0:g:2", "broker id 0 appears twice"),
        ("0:h:1,1:H:1", "both H:1"),
    ],
)
def test_parse_broker_list_errors(value: str, needle: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_broker_list(value)
    assert info.value.option == "broker.list"
    assert needle in str(info.value)


# --- Cluster construction ------------------------------------------------------------------


def test_exactly_one_source() -> None:
    with pytest.raises(OptionError) as info:
        Cluster(cluster_options(zk_connect="127.0.0.1:2181", broker_list="0:h:1"))
    assert "zk.connect" in str(info.value) and info.value.option == "broker.list"
    with pytest.raises(OptionError) as info:
        Cluster(cluster_options())
    assert info.value.option == "zk.connect"
    assert "broker.list" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"socket_timeout_ms": 0}, "socket.timeout.ms"),
        ({"socket_buffer_size": -1}, "socket.buffersize"),
        ({"broker_list": "0:h"}, "broker.list"),
        ({"zk_connect": "", "broker_list": None}, "zk.connect"),
        ({"zk_connect": "127.0.0.1:2181", "broker_list": None, "zk_session_timeout_ms": 0},
         "zk.sessiontimeout.ms"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], option: str) -> None:
    args: dict[str, Any] = {"broker_list": "0:h:1", **kwargs}
    with pytest.raises(OptionError) as info:
        Cluster(cluster_options(**args))
    assert info.value.option == option


def test_broker_list_mode_without_contacting_anything() -> None:
    with Cluster(cluster_options(broker_list="1:h1:9092,0:h0:9093")) as cluster:
        assert cluster.registry() is None
        assert cluster.brokers() == {
            0: BrokerAddress(0, "h0", 9093),
            1: BrokerAddress(1, "h1", 9092),
        }
        with pytest.raises(OptionError) as info:
            cluster.topics()
        assert info.value.option == "zk.connect"
        with pytest.raises(TopicNameError):
            cluster.partitions("../etc")
        assert "h1:9092" in repr(cluster)


# --- ZooKeeper mode (nodes written as 0.7.2 does) ------------------------------------------


@pytest.mark.zk
def test_zookeeper_mode(zk_connect: str, kz: KazooClient) -> None:
    kz.create("/brokers/ids/0", b"127.0.0.1-1795304894516:127.0.0.1:9092",
              ephemeral=True, makepath=True)
    kz.create("/brokers/ids/1", b"10.0.0.12-1324306324402:10.0.0.12:9093", ephemeral=True)
    kz.create("/brokers/topics/events/1", b"3", ephemeral=True, makepath=True)
    kz.create("/brokers/topics/events/0", b"2", ephemeral=True)
    kz.create("/brokers/topics/audit/1", b"1", ephemeral=True, makepath=True)
    # a topic node of a broker no longer in /brokers/ids: nothing to connect to
    kz.create("/brokers/topics/events/9", b"4", ephemeral=True)
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster:
        registry = cluster.registry()
        assert isinstance(registry, Registry)
        assert cluster.brokers() == {
            0: BrokerAddress(0, "127.0.0.1", 9092),
            1: BrokerAddress(1, "10.0.0.12", 9093),
        }
        assert cluster.topics() == ["audit", "events"]
        assert cluster.partitions("events") == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
        assert cluster.partitions("audit") == [(1, 0)]
        assert cluster.partitions("unknown") == []
        assert cluster.partition_count("events", 1) == 3
        assert cluster.partition_count("events", 5) == 0
        assert zk_connect in repr(cluster)


@pytest.mark.zk
def test_zookeeper_mode_empty(zk_connect: str) -> None:
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster:
        assert cluster.brokers() == {}
        assert cluster.topics() == []
        assert cluster.partitions("events") == []


# --- against the embedded 0.7 broker -------------------------------------------------------


def _produce(host: str, port: int, topic: str, partition: int) -> None:
    from kafka_pyspark.client import BrokerConnection

    with BrokerConnection(host, port, timeout=10.0) as conn:
        conn.produce(topic, partition, message(b"hello"))
        conn.barrier(topic, partition)


def _wait_registered(registry: Registry, topic: str, brokers: int) -> dict[int, int]:
    """0.7.2 registers a new topic asynchronously after its first produce; wait (bounded)."""
    deadline = time.monotonic() + 30.0
    while True:
        counts = registry.topic_partitions(topic)
        if len(counts) >= brokers or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


@pytest.mark.zk
def test_broker_list_probes_the_embedded_broker(broker: EmbeddedBroker) -> None:
    with Cluster(cluster_options(broker_list=broker.broker_list_entry)) as cluster:
        assert cluster.brokers() == {0: BrokerAddress(0, broker.host, broker.port)}
        _produce(broker.host, broker.port, "events", 1)
        assert cluster.partitions("events") == [(0, 0), (0, 1)]
        # a topic the broker never saw still reports the broker's default partition count
        assert cluster.partitions("never-written") == [(0, 0), (0, 1)]
        assert cluster.partition_count("events", 0) == 2


@pytest.mark.zk
def test_broker_list_two_brokers(brokers: list[EmbeddedBroker]) -> None:
    broker_list = ",".join(b.broker_list_entry for b in reversed(brokers))
    with Cluster(cluster_options(broker_list=broker_list, socket_timeout_ms=10000)) as cluster:
        assert list(cluster.brokers()) == [0, 1]
        assert cluster.partitions("t") == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]


@pytest.mark.zk
def test_zookeeper_mode_against_embedded_brokers(
    zk_connect: str, brokers: list[EmbeddedBroker]
) -> None:
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster:
        assert cluster.brokers() == {
            b.broker_id: BrokerAddress(b.broker_id, b.host, b.port) for b in brokers
        }
        assert cluster.partitions("events") == []  # not produced yet: not registered
        for b in brokers:
            _produce(b.host, b.port, "events", 0)
        registry = cluster.registry()
        assert registry is not None
        assert _wait_registered(registry, "events", 2) == {0: 2, 1: 3}
        assert cluster.topics() == ["events"]
        assert cluster.partitions("events") == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]


@pytest.mark.zk
def test_broker_list_unreachable_broker_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        Cluster(
            cluster_options(broker_list=f"0:127.0.0.1:{port}", socket_timeout_ms=2000)
        ) as cluster,
        pytest.raises(KafkaError) as info,
    ):
        cluster.partitions("events")
    assert f"127.0.0.1:{port}" in str(info.value)
