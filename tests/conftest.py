"""Shared fixtures: a real ZooKeeper (Debian's package), embedded 0.7 brokers, a local Spark.

Fixture contract (used by every test module; keep names stable):

- ``zookeeper`` (session): a running :class:`ZooKeeperServer`; ``.connect_string`` is
  ``"127.0.0.1:<port>"``. Debian's unless ``KAFKA07_TEST_ZOOKEEPER`` names another server or
  jar (tests/_zk_server.py); a test marked ``zk_needs("multi")`` / ``("multiRead")`` skips on
  a server without those requests.
- ``zk_connect``: a fresh chroot per test on that server, ``"127.0.0.1:<port>/t-<hex>"``, so
  tests never see each other's registry nodes.
- ``kz``: a started kazoo session inside that chroot (stopped and closed after the test).
- ``broker``: one started :class:`EmbeddedBroker` (id 0, 2 partitions) registered under
  ``zk_connect``.
- ``brokers``: two started brokers (ids 0 and 1, 2 and 3 partitions) under ``zk_connect``.
- ``bare_broker``: one started :class:`EmbeddedBroker` (2 partitions) without ZooKeeper, for the
  raw-socket tests of docs/dev/PROTOCOL.md's measured broker behaviour
  (``test_broker_facts_*.py``).
- ``spark`` (session): a local[2] SparkSession using ``spark-conf/`` with kafka07 registered.
- ``logdir``: a directory of segment files (``tmp_path/kafka-logs``) of two topics, several
  partitions and segments, every format (tests/segment_builder.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from pyspark.sql import SparkSession

    from kafka_pyspark.testing._zookeeper import ZooKeeperServer
    from kafka_pyspark.testing.broker import EmbeddedBroker

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "spark-conf"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    from _zk_server import ExternalZooKeeper, external_server, server

    given = external_server()
    if given is not None:
        yield ExternalZooKeeper(given)
        return
    with server() as zk:
        yield zk


_FEATURES: dict[str, set[str]] = {}


@pytest.fixture(autouse=True, scope="module")
def _no_cached_zookeeper_sessions() -> Iterator[None]:
    """The exactly-once store's ZooKeeper sessions, cached per process, end with the module
    that opened them: a later module's ZooKeeper is another server, and a live session's thread
    draws from ``random`` while Hypothesis generates data (it warns then)."""
    yield
    from kafka_pyspark._write.store import close_sessions

    close_sessions()


@pytest.fixture(autouse=True)
def _zk_needs(request: pytest.FixtureRequest) -> None:
    """A test marked ``zk_needs("multi", ...)`` skips on a ZooKeeper without those requests."""
    marker = request.node.get_closest_marker("zk_needs")
    if marker is None:
        return
    from _zk_server import describe, features

    connect = request.getfixturevalue("zookeeper").connect_string
    if connect not in _FEATURES:
        _FEATURES[connect] = features(connect)
    missing = [kind for kind in marker.args if kind not in _FEATURES[connect]]
    if missing:
        pytest.skip(f"needs ZooKeeper's {' and '.join(missing)}: {describe(connect)} has not")


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> Iterator[str]:
    yield zookeeper.new_chroot("t")


@pytest.fixture
def requests_sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The type of every request kazoo sends to ZooKeeper (``Create``, ``Transaction``, ...)."""
    from kazoo.client import KazooClient

    sent: list[str] = []
    real = KazooClient._call

    def spy(self: KazooClient, request: Any, async_object: Any) -> Any:
        sent.append(type(request).__name__)
        return real(self, request, async_object)

    monkeypatch.setattr(KazooClient, "_call", spy)
    yield sent


@pytest.fixture
def kz(zk_connect: str) -> Iterator[KazooClient]:
    from _cluster import kazoo_client

    client = kazoo_client(zk_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture
def broker(tmp_path: Path, zk_connect: str) -> Iterator[EmbeddedBroker]:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "broker-0", zk_connect=zk_connect, num_partitions=2
    ) as b:
        yield b


@pytest.fixture
def bare_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with EmbeddedBroker(log_dir=tmp_path / "logs", num_partitions=2) as broker:
        yield broker


@pytest.fixture
def brokers(tmp_path: Path, zk_connect: str) -> Iterator[list[EmbeddedBroker]]:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "broker-0", zk_connect=zk_connect, num_partitions=2
    ) as b0, EmbeddedBroker(
        broker_id=1, log_dir=tmp_path / "broker-1", zk_connect=zk_connect, num_partitions=3
    ) as b1:
        yield [b0, b1]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_pyspark-tests")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    """Two topics, several partitions and segments, every format."""
    from segment_builder import (
        GZIP,
        LZ4,
        SNAPPY,
        ZSTD,
        batch,
        k07,
        message,
        name,
        record,
        v2_file,
        wrapper,
    )
    root = tmp_path / "kafka-logs"
    for d in ("events-0", "events-1", "events-2", "old-0", "mixed-0"):
        (root / d).mkdir(parents=True)
    (root / "events-0" / name(0)).write_bytes(v2_file(0, 20, ZSTD))
    (root / "events-0" / name(20)).write_bytes(v2_file(20, 10, LZ4))
    (root / "events-0" / name(20, ".index")).write_bytes(b"\0" * 16)  # ignored
    (root / "events-1" / name(0)).write_bytes(v2_file(0, 7, SNAPPY))
    (root / "events-2" / name(100)).write_bytes(v2_file(100, 3, GZIP))
    (root / "old-0" / name(0, ".kafka")).write_bytes(k07([b"a", b"bb"]))
    (root / "old-0" / name(23, ".kafka")).write_bytes(k07([b"ccc"]))
    (root / "mixed-0" / name(0)).write_bytes(
        message(0, b"m0") + wrapper(2, [message(0, b"m1", magic=1, timestamp=5),
                                        message(1, b"m2", magic=1, timestamp=6)], LZ4, magic=1,
                                    timestamp=6) + batch(3, [record(0, b"m3")]))
    (root / "meta.properties").write_text("version=0\n")
    (root / "not-a-partition").mkdir()
    return root
