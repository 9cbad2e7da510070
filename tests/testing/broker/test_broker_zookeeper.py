"""The embedded broker's ZooKeeper registry (0.7.2 KafkaZooKeeper) against a real ZooKeeper."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _broker_raw import THREE, Conn, wait_until
from _cluster import expire_broker_session
from kazoo.client import KazooClient

from kafka_pyspark.cli import main
from kafka_pyspark.testing.broker import EmbeddedBroker, EmbeddedBrokerError

pytestmark = pytest.mark.zk


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def node(kz: KazooClient, path: str) -> tuple[bytes, Any] | None:
    if kz.exists(path) is None:
        return None
    data, stat = kz.get(path)
    return data, stat


def produce(b: EmbeddedBroker, topic: str, partition: int = 0) -> None:
    with Conn(b) as c:
        c.produce(topic, partition, THREE)
        c.barrier()


def test_broker_id_node(broker: EmbeddedBroker, kz: KazooClient) -> None:
    data, stat = kz.get("/brokers/ids/0")
    # PROTOCOL.md "Measured: ZooKeeper": 127.0.0.1-1795304894516:127.0.0.1:9092 (host-ms:host:port)
    assert re.fullmatch(rb"127\.0\.0\.1-\d{13}:127\.0\.0\.1:%d" % broker.port, data)
    assert stat.ephemeralOwner != 0
    assert kz.get_children("/brokers/ids") == ["0"]


def _copy(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for s in (src, dst):
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def forwarder(port: int) -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP forwarder to 127.0.0.1:``port``: yields its own port and the connections it
    accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = listener.accept()
                accepted.append(client)
                server = socket.create_connection(("127.0.0.1", port), timeout=10.0)
                for a, b in ((client, server), (server, client)):
                    threading.Thread(target=_copy, args=(a, b), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        listener.close()
        for c in accepted:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        thread.join(10)


def test_advertised_address_is_registered_and_reaches_the_broker(
    tmp_path: Path, zk_connect: str, kz: KazooClient, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    with forwarder(port) as (advertised, accepted), EmbeddedBroker(
        4, port=port, advertised_host="localhost", advertised_port=advertised,
        log_dir=tmp_path, zk_connect=zk_connect,
    ) as b:
        # 0.7.2 registers its `hostname` setting in both places: creator and host
        data = kz.get("/brokers/ids/4")[0]
        assert re.fullmatch(rb"localhost-\d{13}:localhost:%d" % advertised, data)
        assert (b.host, b.port) == ("127.0.0.1", port)
        assert (b.advertised_host, b.advertised_port) == ("localhost", advertised)
        assert b.broker_list_entry == f"4:localhost:{advertised}"
        produce(b, "t")  # straight to the listening port
        b.wait_for_topic("t")
        assert accepted == []
        # a client finds the broker in ZooKeeper and reaches it through the forwarder
        assert main(["consume", "--zk", zk_connect, "--topic", "t"]) == 0
        assert capsys.readouterr().out == "value-0\nvalue-1\nvalue-2\n"
        assert len(accepted) >= 1


def test_advertised_address_defaults_to_the_listening_one(broker: EmbeddedBroker) -> None:
    assert (broker.advertised_host, broker.advertised_port) == (broker.host, broker.port)
    assert broker.broker_list_entry == f"0:127.0.0.1:{broker.port}"


def test_topic_node_on_first_produce(broker: EmbeddedBroker, kz: KazooClient) -> None:
    assert kz.exists("/brokers/topics/t/0") is None
    produce(broker, "t")
    broker.wait_for_topic("t", timeout=10.0)
    assert wait_until(lambda: kz.exists("/brokers/topics/t/0") is not None)
    data, stat = kz.get("/brokers/topics/t/0")
    assert data == b"2"
    assert stat.ephemeralOwner != 0
    produce(broker, "t", 1)  # another partition of a known topic: nothing new
    assert kz.get_children("/brokers/topics") == ["t"]
    assert kz.get_children("/brokers/topics/t") == ["0"]


def test_nodes_vanish_on_stop_and_return_on_start(
    broker: EmbeddedBroker, kz: KazooClient
) -> None:
    produce(broker, "t")
    broker.wait_for_topic("t")
    broker.stop()
    assert kz.exists("/brokers/ids/0") is None
    assert kz.exists("/brokers/topics/t/0") is None
    assert kz.exists("/brokers/topics/t") is not None  # the persistent parent stays
    broker.start()  # topics on disk are registered during start
    assert kz.get("/brokers/topics/t/0")[0] == b"2"
    assert kz.exists("/brokers/ids/0") is not None
    broker.restart()
    assert kz.get("/brokers/topics/t/0")[0] == b"2"


def test_two_brokers(brokers: list[EmbeddedBroker], kz: KazooClient) -> None:
    b0, b1 = brokers
    produce(b0, "t")
    produce(b1, "t", 2)
    b0.wait_for_topic("t")
    b1.wait_for_topic("t")
    assert sorted(kz.get_children("/brokers/ids")) == ["0", "1"]
    assert kz.get("/brokers/ids/1")[0].endswith(b":127.0.0.1:%d" % b1.port)
    assert kz.get("/brokers/topics/t/0")[0] == b"2"
    assert kz.get("/brokers/topics/t/1")[0] == b"3"


def test_topic_partitions_override_is_registered(
    tmp_path: Path, zk_connect: str, kz: KazooClient
) -> None:
    with EmbeddedBroker(
        3, log_dir=tmp_path, zk_connect=zk_connect, topic_partitions={"big": 5}
    ) as b:
        produce(b, "big", 4)
        produce(b, "small")
        b.wait_for_topic("big")
        b.wait_for_topic("small")
        assert kz.get("/brokers/topics/big/3")[0] == b"5"
        assert kz.get("/brokers/topics/small/3")[0] == b"1"


def test_stale_own_node_from_previous_session_is_replaced(
    tmp_path: Path, zk_connect: str, kz: KazooClient
) -> None:
    port = free_port()
    # a node left by "this broker" (same host:port) in a session that has not expired yet
    kz.create("/brokers/ids/7", b"127.0.0.1-1:127.0.0.1:%d" % port, ephemeral=True,
              makepath=True)
    kz.create("/brokers/topics/t/7", b"99", ephemeral=True, makepath=True)
    (tmp_path / "t-0").mkdir()
    with EmbeddedBroker(7, port=port, log_dir=tmp_path, zk_connect=zk_connect) as b:
        data, stat = kz.get("/brokers/ids/7")
        assert data != b"127.0.0.1-1:127.0.0.1:%d" % port
        assert data.endswith(b":127.0.0.1:%d" % b.port)
        assert stat.ephemeralOwner != kz.client_id[0]
        data, stat = kz.get("/brokers/topics/t/7")
        assert data == b"1" and stat.ephemeralOwner != kz.client_id[0]


def test_id_held_by_another_broker_fails_start(
    tmp_path: Path, zk_connect: str, kz: KazooClient
) -> None:
    kz.create("/brokers/ids/5", b"10.0.0.9-1:10.0.0.9:9092", ephemeral=True, makepath=True)
    b = EmbeddedBroker(5, log_dir=tmp_path, zk_connect=zk_connect, zk_session_timeout=1.0)
    with pytest.raises(EmbeddedBrokerError, match="another broker"):
        b.start()
    assert not b.running
    assert kz.get("/brokers/ids/5")[0] == b"10.0.0.9-1:10.0.0.9:9092"
    b.close()


def test_session_expiry_reregisters(broker: EmbeddedBroker, zk_connect: str,
                                    kz: KazooClient) -> None:
    produce(broker, "t")
    broker.wait_for_topic("t")
    owner = kz.get("/brokers/ids/0")[1].ephemeralOwner
    expire_broker_session(broker, zk_connect)

    def registered_again() -> bool:
        for path in ("/brokers/ids/0", "/brokers/topics/t/0"):
            n = node(kz, path)
            if n is None or n[1].ephemeralOwner in (0, owner):
                return False
        return True

    assert wait_until(registered_again, timeout=20.0)
    assert kz.get("/brokers/topics/t/0")[0] == b"2"
    produce(broker, "u")  # a new topic on the new session
    broker.wait_for_topic("u")
    assert wait_until(lambda: kz.exists("/brokers/topics/u/0") is not None)
