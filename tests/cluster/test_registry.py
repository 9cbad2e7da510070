"""Registry (kazoo) against a real ZooKeeper, with nodes written exactly as Kafka 0.7.2 does.

Values are the ones observed from a 0.7.2 broker (docs/dev/PROTOCOL.md "Measured: ZooKeeper") and
the example broker of the 0.7 driver documentation ("Writing a Driver for Kafka").
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cluster import kazoo_client
from _zk_server import server as zk_server
from kazoo.client import KazooClient

from kafka_pyspark._cluster import BrokerInfo, Registry
from kafka_pyspark.errors import OptionError, RegistryError, TopicNameError
from kafka_pyspark.testing._zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zk

# docs/dev/PROTOCOL.md "Measured: ZooKeeper": what a 0.7.2 broker registers (creator is "host-ms").
BROKER0 = b"127.0.0.1-1795304894516:127.0.0.1:9092"
# the driver documentation's example: broker 2 at 10.0.0.12:9092
BROKER2 = b"10.0.0.12-1324306324402:10.0.0.12:9092"


@pytest.fixture
def registry(zk_connect: str) -> Iterator[Registry]:
    with Registry(zk_connect) as r:
        yield r


def register_broker(kz: KazooClient, broker_id: int, value: bytes) -> None:
    kz.create(f"/brokers/ids/{broker_id}", value, ephemeral=True, makepath=True)


def register_topic(kz: KazooClient, topic: str, broker_id: int, count: int) -> None:
    kz.create(
        f"/brokers/topics/{topic}/{broker_id}", str(count).encode(), ephemeral=True, makepath=True
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# --- brokers and topics --------------------------------------------------------------------


def test_brokers_as_registered_by_0_7_2(kz: KazooClient, registry: Registry) -> None:
    register_broker(kz, 0, BROKER0)
    register_broker(kz, 2, BROKER2)
    assert registry.brokers() == {
        0: BrokerInfo(id=0, host="127.0.0.1", port=9092, creator="127.0.0.1-1795304894516"),
        2: BrokerInfo(id=2, host="10.0.0.12", port=9092, creator="10.0.0.12-1324306324402"),
    }
    assert list(registry.brokers()) == [0, 2]


def test_host_is_the_second_field_not_the_creator(kz: KazooClient, registry: Registry) -> None:
    # the creator happens to contain a host, don't rely on it (PROTOCOL.md "Broker registry")
    register_broker(kz, 7, b"some-uuid-1234:broker7.example.com:6667")
    assert registry.brokers() == {
        7: BrokerInfo(7, "broker7.example.com", 6667, "some-uuid-1234")
    }


def test_topics_and_partition_counts(kz: KazooClient, registry: Registry) -> None:
    register_broker(kz, 0, BROKER0)
    register_broker(kz, 2, BROKER2)
    register_topic(kz, "dogs", 2, 4)
    register_topic(kz, "mutts", 2, 5)
    register_topic(kz, "dogs", 0, 2)
    assert registry.topics() == ["dogs", "mutts"]
    assert registry.topic_partitions("dogs") == {0: 2, 2: 4}
    assert list(registry.topic_partitions("dogs")) == [0, 2]
    assert registry.topic_partitions("mutts") == {2: 5}
    assert registry.topic_partitions("cats") == {}


def test_topology_is_brokers_and_counts_in_two_rounds(
    kz: KazooClient, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_pyspark._cluster.zk_session import ZkSession

    register_broker(kz, 0, BROKER0)
    register_broker(kz, 2, BROKER2)
    topics = [f"t{i:02d}" for i in range(12)]
    for i, topic in enumerate(topics):
        register_topic(kz, topic, 2, i + 1)
        if i % 3 == 0:
            register_topic(kz, topic, 0, 7)
    register_topic(kz, "dogs", 5, 1)  # a broker that is not (or no longer) registered
    rounds: list[int] = []
    real = ZkSession._pipeline

    def spy(self: ZkSession, what: str, where: str, requests: Any, expected: Any) -> Any:
        rounds.append(len(requests))
        return real(self, what, where, requests, expected)

    monkeypatch.setattr(ZkSession, "_pipeline", spy)
    # a request per value (not multiRead's few): the count shows which round asked for what
    monkeypatch.setattr(ZkSession, "has_multi_read", lambda self: False)
    brokers, counts = registry.topology([*topics, "dogs", "cats"])
    assert rounds == [1 + 14, 2 + 12 + 4 + 1]  # every listing, then every value
    assert brokers == registry.brokers()
    assert list(brokers) == [0, 2]
    want = {t: ({0: 7, 2: i + 1} if i % 3 == 0 else {2: i + 1}) for i, t in enumerate(topics)}
    assert counts == {**want, "dogs": {5: 1}, "cats": {}}
    assert all(counts[t] == registry.topic_partitions(t) for t in counts)
    assert registry.topology([]) == (brokers, {})


def test_empty_registry(registry: Registry) -> None:
    assert registry.brokers() == {}
    assert registry.topics() == []
    assert registry.topic_partitions("events") == {}
    assert registry.topology(["events"]) == ({}, {"events": {}})
    assert registry.groups() == []
    assert registry.group_offsets("g", "events") == {}
    assert registry.group_owners("g", "events") == {}
    assert registry.consumer_ids("g") == []


def test_ephemeral_nodes_vanish_with_the_broker_session(
    zk_connect: str, registry: Registry
) -> None:
    broker_session = kazoo_client(zk_connect)
    register_broker(broker_session, 0, BROKER0)
    register_topic(broker_session, "events", 0, 2)
    assert set(registry.brokers()) == {0}
    assert registry.topic_partitions("events") == {0: 2}
    broker_session.stop()  # a clean broker stop closes its session
    broker_session.close()
    assert registry.brokers() == {}
    assert registry.topic_partitions("events") == {}


# --- consumer group offsets ----------------------------------------------------------------


def test_group_offsets_written_by_a_0_7_consumer(kz: KazooClient, registry: Registry) -> None:
    base = "/consumers/g1/offsets/events"
    kz.create(f"{base}/0-0", b"51", makepath=True)
    kz.create(f"{base}/0-1", b"0")
    kz.create(f"{base}/1-10", b"1234567890123")
    assert registry.group_offsets("g1", "events") == {
        (0, 0): 51,
        (0, 1): 0,
        (1, 10): 1234567890123,
    }
    assert registry.groups() == ["g1"]


def test_commit_group_offsets_round_trip_and_raw_nodes(
    kz: KazooClient, registry: Registry
) -> None:
    registry.commit_group_offsets(
        "g1", "events", {(0, 0): 1234, (0, 1): 0, (1, 2): 98765}, creator="host-a-1700000000000"
    )
    assert registry.group_offsets("g1", "events") == {(0, 0): 1234, (0, 1): 0, (1, 2): 98765}
    # raw bytes exactly as 0.7's ZookeeperConsumerConnector / ConsumerOffsetChecker read them
    base = "/consumers/g1/offsets/events"
    assert sorted(kz.get_children(base)) == ["0-0", "0-1", "1-2"]
    value, stat = kz.get(f"{base}/0-0")
    assert value == b"1234"
    assert stat.ephemeralOwner == 0  # persistent
    assert kz.get(f"{base}/0-1")[0] == b"0"
    assert kz.get(f"{base}/1-2")[0] == b"98765"
    # parents hold the creator's id (docs/dev/PROTOCOL.md "Intermediate nodes")
    for parent in ("/consumers", "/consumers/g1", "/consumers/g1/offsets", base):
        parent_value, parent_stat = kz.get(parent)
        assert parent_value == b"host-a-1700000000000", parent
        assert parent_stat.ephemeralOwner == 0

    # a second commit overwrites, adds, and leaves parents (and other nodes) alone
    registry.commit_group_offsets(
        "g1", "events", {(0, 0): 2000, (2, 0): 7}, creator="host-b-1800000000000"
    )
    assert registry.group_offsets("g1", "events") == {
        (0, 0): 2000,
        (0, 1): 0,
        (1, 2): 98765,
        (2, 0): 7,
    }
    assert kz.get(f"{base}/0-0")[0] == b"2000"
    assert kz.get(f"{base}/0-0")[1].version == 1
    assert kz.get("/consumers/g1")[0] == b"host-a-1700000000000"


def test_commit_keeps_values_of_existing_parents(kz: KazooClient, registry: Registry) -> None:
    kz.create("/consumers/g2", b"consumer-thread-from-0.7", makepath=True)
    registry.commit_group_offsets("g2", "events", {(0, 0): 17}, creator="me")
    assert kz.get("/consumers")[0] == b""  # created by kazoo's makepath above
    assert kz.get("/consumers/g2")[0] == b"consumer-thread-from-0.7"
    assert kz.get("/consumers/g2/offsets")[0] == b"me"
    assert kz.get("/consumers/g2/offsets/events")[0] == b"me"
    assert kz.get("/consumers/g2/offsets/events/0-0")[0] == b"17"


def test_commit_nothing_creates_nothing(kz: KazooClient, registry: Registry) -> None:
    registry.commit_group_offsets("g3", "events", {}, creator="me")
    assert kz.exists("/consumers") is None


def test_commit_many_partitions(kz: KazooClient, registry: Registry) -> None:
    offsets = {(b, p): b * 1000 + p for b in range(4) for p in range(25)}
    registry.commit_group_offsets("big", "t", offsets, creator="me")
    assert registry.group_offsets("big", "t") == offsets
    assert len(kz.get_children("/consumers/big/offsets/t")) == 100


def test_group_owners_and_consumer_ids(kz: KazooClient, registry: Registry) -> None:
    # as 0.7.2's ZookeeperConsumerConnector registers them (PROTOCOL.md "Measured: ZooKeeper")
    kz.create("/consumers/g/ids/host-1700000000000-abcd", b'{ "events": 1 }',
              ephemeral=True, makepath=True)
    kz.create("/consumers/g/owners/events/0-1", b"host-1700000000000-abcd-0",
              ephemeral=True, makepath=True)
    assert registry.consumer_ids("g") == ["host-1700000000000-abcd"]
    assert registry.group_owners("g", "events") == {(0, 1): "host-1700000000000-abcd-0"}


@pytest.mark.parametrize(
    ("offsets", "what"),
    [
        ({(0, 0): -1}, "offset"),
        ({(-1, 0): 5}, "broker id"),
        ({(0, -2): 5}, "partition"),
        ({(0, 0): True}, "offset"),
    ],
)
def test_commit_rejects_bad_offsets(
    registry: Registry, offsets: dict[tuple[int, int], int], what: str
) -> None:
    with pytest.raises(OptionError, match=what):
        registry.commit_group_offsets("g", "events", offsets, creator="me")


@pytest.mark.parametrize("group", ["", "a/b", ".", "..", "bad\x00name", "tab\tname"])
def test_bad_group_names(registry: Registry, group: str) -> None:
    with pytest.raises(OptionError, match=r"group\.id"):
        registry.group_offsets(group, "events")
    with pytest.raises(OptionError, match=r"group\.id"):
        registry.commit_group_offsets(group, "events", {(0, 0): 1}, creator="me")


@pytest.mark.parametrize("topic", ["", "a/b", "..", "caf\u00e9"])
def test_bad_topic_names(registry: Registry, topic: str) -> None:
    with pytest.raises(TopicNameError):
        registry.topic_partitions(topic)
    with pytest.raises(TopicNameError):
        registry.group_offsets("g", topic)


# --- chroot --------------------------------------------------------------------------------


def test_chroot_isolates_and_prefixes_paths(zookeeper: ZooKeeperServer, zk_connect: str) -> None:
    chroot = zk_connect[len(zookeeper.connect_string) :]
    other_chroot = chroot + "-other"
    root = kazoo_client(zookeeper.connect_string)
    try:
        root.create(f"{other_chroot}/brokers/ids/5", BROKER0, makepath=True)
        with Registry(zk_connect) as mine, Registry(
            zookeeper.connect_string + other_chroot
        ) as other:
            assert mine.chroot == chroot
            assert mine.brokers() == {}
            assert set(other.brokers()) == {5}
            mine.commit_group_offsets("g", "events", {(0, 0): 42}, creator="me")
        # seen from the root, the nodes are under the chroot
        assert root.get(f"{chroot}/consumers/g/offsets/events/0-0")[0] == b"42"
        assert root.exists("/consumers/g/offsets/events/0-0") is None
    finally:
        root.delete(other_chroot, recursive=True)
        root.stop()
        root.close()


def test_missing_chroot_reads_empty_and_commit_says_so(zookeeper: ZooKeeperServer) -> None:
    connect = zookeeper.connect_string + "/no-such-chroot-7f3a"
    with Registry(connect) as registry:
        assert registry.brokers() == {}
        with pytest.raises(RegistryError) as info:
            registry.commit_group_offsets("g", "events", {(0, 0): 1}, creator="me")
    text = str(info.value)
    assert "/no-such-chroot-7f3a" in text and "/consumers" in text and "does not exist" in text


def test_multi_host_connect_string_with_chroot(
    zookeeper: ZooKeeperServer, zk_connect: str, kz: KazooClient
) -> None:
    chroot = zk_connect[len(zookeeper.connect_string) :]
    dead = f"127.0.0.1:{closed_port()}"
    register_broker(kz, 3, BROKER0)
    with Registry(f"{dead},{zookeeper.connect_string}{chroot}") as registry:
        assert set(registry.brokers()) == {3}


# --- malformed nodes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "call"),
    [
        ("/brokers/ids/0", b"garbage", "brokers"),
        ("/brokers/ids/0", b"creator:host", "brokers"),
        ("/brokers/ids/0", b"c:h:9092:extra", "brokers"),
        ("/brokers/ids/0", b"c::9092", "brokers"),
        ("/brokers/ids/0", b"c:h:port", "brokers"),
        ("/brokers/ids/0", b"c:h:0", "brokers"),
        ("/brokers/ids/0", b"c:h:65536", "brokers"),
        ("/brokers/ids/0", b"\xff\xfe:h:1", "brokers"),
        ("/brokers/ids/x1", BROKER0, "brokers"),
        ("/brokers/topics/events/0", b"two", "topic_partitions"),
        ("/brokers/topics/events/0", b"-1", "topic_partitions"),
        ("/brokers/topics/events/0", b"", "topic_partitions"),
        ("/brokers/topics/events/b0", b"2", "topic_partitions"),
        ("/consumers/g/offsets/events/0-0", b"12a", "group_offsets"),
        ("/consumers/g/offsets/events/0-0", b" 12", "group_offsets"),
        ("/consumers/g/offsets/events/0-0", b"-1", "group_offsets"),
        ("/consumers/g/offsets/events/0-0", b"1_000", "group_offsets"),
        ("/consumers/g/offsets/events/0_0", b"12", "group_offsets"),
        ("/consumers/g/offsets/events/0", b"12", "group_offsets"),
    ],
)
def test_malformed_nodes_name_the_node(
    zookeeper: ZooKeeperServer,
    zk_connect: str,
    kz: KazooClient,
    registry: Registry,
    path: str,
    value: bytes,
    call: str,
) -> None:
    kz.create(path, value, makepath=True)
    fn: Any = getattr(registry, call)
    args: tuple[str, ...] = {
        "brokers": (),
        "topic_partitions": ("events",),
        "group_offsets": ("g", "events"),
    }[call]
    with pytest.raises(RegistryError) as info:
        fn(*args)
    text = str(info.value)
    assert path in text
    assert zk_connect in text  # the ZooKeeper address (with chroot)
    if call != "group_offsets":  # the stream's one-read view checks every node the same way
        with pytest.raises(RegistryError) as info:
            registry.topology(["events"])
        assert str(info.value) == text


# --- failures are bounded ------------------------------------------------------------------


def _run_bounded(fn: Any, limit: float = 60.0) -> BaseException | None:
    """Run fn in a thread; fail the test (instead of hanging the suite) if it never returns."""
    result: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            result.append(None)
        except BaseException as e:  # handed back to the test
            result.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(limit)
    assert result, f"call did not return within {limit}s (hang)"
    return result[0]


def test_unreachable_zookeeper_is_a_registry_error_not_a_hang() -> None:
    address = f"127.0.0.1:{closed_port()}"
    registry = Registry(address, connection_timeout_ms=1000, session_timeout_ms=2000)
    error = _run_bounded(registry.brokers)
    assert isinstance(error, RegistryError)
    assert address in str(error) and "1000 ms" in str(error)
    registry.close()


def test_unresolvable_host_is_a_registry_error() -> None:
    registry = Registry("no-such-host.invalid:2181", connection_timeout_ms=1000)
    error = _run_bounded(registry.topics)
    assert isinstance(error, RegistryError)
    assert "no-such-host.invalid:2181" in str(error)


def test_calls_after_close_fail_cleanly(zk_connect: str) -> None:
    registry = Registry(zk_connect)
    assert registry.topics() == []
    registry.close()
    registry.close()  # idempotent
    with pytest.raises(RegistryError, match="closed"):
        registry.topics()


@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"zk_connect": ""}, "zk.connect"),
        ({"zk_connect": "   "}, "zk.connect"),
        ({"zk_connect": "host:notaport"}, "zk.connect"),
        ({"zk_connect": "127.0.0.1:2181/chroot/"}, "zk.connect"),
        ({"zk_connect": "127.0.0.1:2181", "session_timeout_ms": 0}, "zk.sessiontimeout.ms"),
        ({"zk_connect": "127.0.0.1:2181", "connection_timeout_ms": -5},
         "zk.connectiontimeout.ms"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], option: str) -> None:
    with pytest.raises(OptionError) as info:
        Registry(**kwargs)
    assert info.value.option == option


def test_survives_a_zookeeper_restart_and_is_bounded_while_it_hangs(tmp_path: Path) -> None:
    with zk_server(data_dir=tmp_path / "zk") as server:
        setup = kazoo_client(server.connect_string)
        setup.create("/brokers/ids/0", BROKER0, makepath=True)  # persistent here: survives
        setup.stop()
        setup.close()
        registry = Registry(
            server.connect_string, session_timeout_ms=2000, connection_timeout_ms=2000
        )
        try:
            assert set(registry.brokers()) == {0}
            server.restart()
            assert _run_bounded(registry.brokers) is None
            assert set(registry.brokers()) == {0}
            registry.commit_group_offsets("g", "t", {(0, 0): 5}, creator="me")

            server.pause()  # accepts nothing, answers nothing
            try:
                error = _run_bounded(registry.topics)
            finally:
                server.resume()
            assert isinstance(error, RegistryError)
            assert server.connect_string in str(error)
            # and it recovers once ZooKeeper answers again
            assert registry.group_offsets("g", "t") == {(0, 0): 5}
        finally:
            registry.close()


def test_a_group_id_zookeeper_refuses_is_refused_before_any_request(
    registry: Registry, kz: KazooClient
) -> None:
    from kazoo.exceptions import BadArgumentsError

    emoji = "g\U0001f600"  # outside Unicode's BMP: ZooKeeper refuses its surrogate pair
    with pytest.raises(BadArgumentsError):  # what the server answers such a node
        kz.create(f"/{emoji}", b"")
    for call in (
        lambda: registry.commit_group_offsets(emoji, "t", {(0, 0): 1}, creator="c"),
        lambda: registry.group_offsets(emoji, "t"),
    ):
        with pytest.raises(OptionError, match="is not a legal group id") as info:
            call()
        assert info.value.option == "group.id"
    assert kz.exists("/consumers") is None  # nothing was sent
    # a BMP one outside ASCII is a ZooKeeper node name: committed and read back as written
    group = "gr\u00fcppe-\u4e2d"
    registry.commit_group_offsets(group, "t", {(0, 0): 1}, creator="c")
    assert registry.group_offsets(group, "t") == {(0, 0): 1}
    assert kz.get_children("/consumers") == [group]
    assert kz.get(f"/consumers/{group}/offsets/t/0-0")[0] == b"1"
