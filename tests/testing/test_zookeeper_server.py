"""The test ZooKeeper launcher (kafka_pyspark.testing._zookeeper) against Debian's real server."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cluster import kazoo_client
from kazoo.client import KazooClient

from kafka_pyspark.testing import _zookeeper as zkmod
from kafka_pyspark.testing._zookeeper import ZooKeeperServer, ZooKeeperServerError

pytestmark = pytest.mark.zk


@pytest.fixture
def kazoo_root(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    client = kazoo_client(zookeeper.connect_string)
    yield client
    client.stop()
    client.close()


def test_session_server_is_loopback_and_usable(
    zookeeper: ZooKeeperServer, kazoo_root: KazooClient
) -> None:
    host, port = zookeeper.connect_string.split(":")
    assert host == "127.0.0.1"
    assert int(port) == zookeeper.port > 0
    assert zookeeper.running
    assert "zookeeper" in kazoo_root.get_children("/")


def test_zk_connect_fixture_is_a_fresh_existing_chroot(
    zookeeper: ZooKeeperServer, zk_connect: str, kazoo_root: KazooClient
) -> None:
    assert zk_connect.startswith(zookeeper.connect_string + "/t-")
    chroot = zk_connect[len(zookeeper.connect_string) :]
    assert kazoo_root.exists(chroot) is not None
    assert kazoo_root.get_children(chroot) == []


def test_lifecycle_restart_keeps_port_and_data_stop_cleans_up(tmp_path: Path) -> None:
    data_dir = tmp_path / "zk-data"
    server = ZooKeeperServer(data_dir=data_dir)
    with server:
        port = server.port
        work_dir = server.work_dir
        assert work_dir is not None and work_dir.is_dir()
        assert server.log_path is not None and server.log_path.is_file()
        client = kazoo_client(server.connect_string)
        try:
            client.create("/persisted", b"v")
        finally:
            client.stop()
            client.close()
        server.restart()
        assert server.port == port and server.running
        client = kazoo_client(server.connect_string)
        try:
            assert client.get("/persisted")[0] == b"v"
        finally:
            client.stop()
            client.close()
        pid = server.pid
        assert pid is not None
    assert not server.running
    assert server.pid is None
    assert not work_dir.exists()
    assert data_dir.is_dir()  # a caller's data_dir is kept
    # the port is released: we can bind it
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine
        s.bind(("127.0.0.1", port))
    with pytest.raises(ZooKeeperServerError, match="not started"):
        _ = server.connect_string


def test_port_taken_fails_with_the_log_in_the_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ZooKeeperServer(port=port, start_timeout=30)
        with pytest.raises(ZooKeeperServerError) as info:
            server.start()
    text = str(info.value)
    assert f"127.0.0.1:{port}" in text
    assert "Address already in use" in text or "BindException" in text
    assert not server.running
    server.stop()


def test_lost_port_race_is_retried_with_a_new_port(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    ports = [taken.getsockname()[1]]
    real_free_port = zkmod.free_port

    def racy_free_port(host: str = "127.0.0.1") -> int:
        return ports.pop() if ports else real_free_port(host)

    monkeypatch.setattr(zkmod, "free_port", racy_free_port)
    try:
        with ZooKeeperServer(start_timeout=60) as server:
            assert server.port != taken.getsockname()[1]
            client = kazoo_client(server.connect_string)
            client.stop()
            client.close()
    finally:
        taken.close()


def test_missing_package_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(zkmod, "ZOOKEEPER_JAR", tmp_path / "nope" / "zookeeper.jar")
    with pytest.raises(ZooKeeperServerError) as info:
        ZooKeeperServer().start()
    assert str(info.value) == (
        "Debian's zookeeper package is not installed: apt-get install -y zookeeper"
    )


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    with pytest.raises(ZooKeeperServerError, match="java was not found"):
        ZooKeeperServer().start()


def test_bad_port_argument() -> None:
    with pytest.raises(ValueError):
        ZooKeeperServer(port=70000)


def test_pause_requires_running() -> None:
    server: Any = ZooKeeperServer()
    with pytest.raises(ZooKeeperServerError):
        server.pause()
    server.resume()  # no-op when not running
