"""A ``zk.connect`` without the cluster's chroot (or with a wrong one) is an error naming the
path it looked at and where the registry is, against a real ZooKeeper of its own (the hints
look at the ZooKeeper root, which the shared server's per-test chroots would crowd).

Registry nodes are written as a 0.7.2 broker writes them (``test_registry.py``); the Spark
tests register embedded brokers under a chroot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cluster import kazoo_client
from kazoo.client import KazooClient

from kafka_pyspark._cluster import (
    Cluster,
    Registry,
    cluster_options,
    no_brokers_error,
    topic_elsewhere,
)
from kafka_pyspark._options import Subscribe
from kafka_pyspark._spark.read.discovery import discover
from kafka_pyspark.errors import NoBrokersRegisteredError, TopicNotFoundError
from kafka_pyspark.testing._zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zk

BROKER0 = b"127.0.0.1-1795304894516:127.0.0.1:9092"


@pytest.fixture(scope="module")
def own_zk() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as zk:
        yield zk


@pytest.fixture
def hosts(own_zk: ZooKeeperServer) -> Iterator[str]:
    """The server's connect string (no chroot); its nodes are removed after the test."""
    yield own_zk.connect_string
    kz = kazoo_client(own_zk.connect_string)
    try:
        for name in kz.get_children("/"):
            if name != "zookeeper":
                kz.delete(f"/{name}", recursive=True)
    finally:
        kz.stop()
        kz.close()


@pytest.fixture
def root(hosts: str) -> Iterator[KazooClient]:
    kz = kazoo_client(hosts)
    try:
        yield kz
    finally:
        kz.stop()
        kz.close()


def register(kz: KazooClient, chroot: str, broker_id: int = 0, *topics: str) -> None:
    kz.create(f"{chroot}/brokers/ids/{broker_id}", BROKER0, ephemeral=True, makepath=True)
    for topic in topics:
        kz.create(f"{chroot}/brokers/topics/{topic}/{broker_id}", b"2", ephemeral=True,
                  makepath=True)


def error_for(zk_connect: str) -> str:
    """The error a read's discovery meets through ``zk_connect``."""
    with Cluster(cluster_options(zk_connect=zk_connect)) as cluster, pytest.raises(
        NoBrokersRegisteredError
    ) as e:
        discover(cluster, Subscribe(("events",)), strict=True)
    return str(e.value)


def test_no_chroot_given_names_the_one_found(hosts: str, root: KazooClient) -> None:
    register(root, "/kafka")
    root.ensure_path("/other/thing")
    assert error_for(hosts) == (
        f"ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /kafka "
        f"(1 broker registered): use zk.connect '{hosts}/kafka'"
    )


def test_wrong_chroot_names_the_right_one(hosts: str, root: KazooClient) -> None:
    register(root, "/kafka", 0)
    register(root, "/kafka", 1)
    root.ensure_path("/old/brokers/ids")  # a registry without brokers: suggested last
    assert error_for(f"{hosts}/kafak") == (
        f"ZooKeeper {hosts}/kafak has no node /kafak/brokers/ids: a Kafka registry is under "
        f"/kafka (2 brokers registered), /old (0 brokers registered): use zk.connect "
        f"'{hosts}/kafka'"
    )


def test_chroot_one_level_short(hosts: str, root: KazooClient) -> None:
    register(root, "/kafka/prod")
    assert error_for(f"{hosts}/kafka") == (
        f"ZooKeeper {hosts}/kafka has no node /kafka/brokers/ids: a Kafka registry is under "
        f"/kafka/prod (1 broker registered): use zk.connect '{hosts}/kafka/prod'"
    )


def test_chroot_given_for_a_registry_at_the_root(hosts: str, root: KazooClient) -> None:
    register(root, "", 0, "events")  # the cluster registers at the root: no chroot to give
    assert error_for(f"{hosts}/kafka") == (
        f"ZooKeeper {hosts}/kafka has no node /kafka/brokers/ids: a Kafka registry is under / "
        f"(1 broker registered): use zk.connect '{hosts}'"
    )
    root.ensure_path("/kafka/brokers/topics")  # the chroot exists but holds no topic
    with Registry(f"{hosts}/kafka") as registry:
        assert topic_elsewhere(registry, "events") == (
            f"; it is registered under / (1 broker holding it): use zk.connect '{hosts}'"
        )


def test_no_registry_anywhere_lists_the_root(hosts: str, root: KazooClient) -> None:
    root.ensure_path("/hbase/rs")
    root.ensure_path("/app")
    assert error_for(hosts) == (
        f"ZooKeeper {hosts} has no node /brokers/ids: is it the cluster's ZooKeeper, and does "
        "the cluster register under a chroot (zk.connect 'host:port/chroot')? (the ZooKeeper "
        "root holds: /app, /hbase)"
    )
    assert error_for(f"{hosts}/kafka") == (
        f"ZooKeeper {hosts}/kafka has no node /kafka/brokers/ids: check the chroot /kafka: "
        "no node at the ZooKeeper root holds brokers/ids (the ZooKeeper root holds: /app, /hbase)"
    )


def test_chroot_nobody_may_list(hosts: str, root: KazooClient) -> None:
    from kazoo.security import OPEN_ACL_UNSAFE, make_acl

    register(root, "", 0)  # a registry at the root, which the refused look-around cannot see
    no_read = make_acl("world", "anyone", create=True, delete=True, write=True, admin=True)
    root.create("/kafka", acl=[no_read])
    try:
        assert error_for(f"{hosts}/kafka") == (
            f"ZooKeeper {hosts}/kafka has no node /kafka/brokers/ids: check the chroot /kafka "
            "(where else on this ZooKeeper a registry is could not be looked up)"
        )
    finally:
        root.set_acls("/kafka", OPEN_ACL_UNSAFE)


def test_registry_whose_brokers_are_all_down(hosts: str, root: KazooClient) -> None:
    root.ensure_path("/kafka/brokers/ids")  # persistent; the brokers' ephemeral nodes are gone
    assert error_for(f"{hosts}/kafka") == (
        f"ZooKeeper {hosts}/kafka has no broker registered in /kafka/brokers/ids: are the "
        "brokers down?"
    )


def test_a_registered_broker_passes(hosts: str, root: KazooClient) -> None:
    register(root, "/kafka", 0, "events")
    with Cluster(cluster_options(zk_connect=f"{hosts}/kafka")) as cluster:
        tps, _ = discover(cluster, Subscribe(("events",)), strict=True)
        assert tps == [("events", 0, 0), ("events", 0, 1)]
    with Registry(f"{hosts}/kafka") as registry:
        assert "a Kafka registry" not in str(no_brokers_error(registry))


def test_topic_under_another_chroot(hosts: str, root: KazooClient) -> None:
    register(root, "", 0, "logs")  # a cluster at the root without the topic
    register(root, "/kafka", 0, "events")
    with Cluster(cluster_options(zk_connect=hosts)) as cluster, pytest.raises(
        TopicNotFoundError
    ) as e:
        discover(cluster, Subscribe(("events",)), strict=True)
    assert str(e.value).endswith(
        "(no live broker has it); it is registered under /kafka (1 broker holding it): use "
        f"zk.connect '{hosts}/kafka'"
    )
    with Registry(hosts) as registry:
        assert topic_elsewhere(registry, "nowhere") == ""


def test_registry_without_any_topic(hosts: str, root: KazooClient) -> None:
    register(root, "/kafka")
    with Registry(f"{hosts}/kafka") as registry:
        assert topic_elsewhere(registry, "events") == (
            "; /kafka/brokers/topics holds no topic at all: check the chroot in zk.connect"
        )


@pytest.mark.parametrize("command", [["topics"], ["offsets", "--topic", "events"]])
def test_cli_without_the_chroot(hosts: str, root: KazooClient, command: list[str],
                                capsys: pytest.CaptureFixture[str]) -> None:
    from kafka_pyspark.cli import main

    register(root, "/kafka")
    assert main([command[0], "--zk", hosts, *command[1:]]) == 2
    # the Spark paths' diagnosis, in the command's words (--zk, not zk.connect)
    assert capsys.readouterr().err == (
        f"kafka07: ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /kafka "
        f"(1 broker registered): use --zk '{hosts}/kafka'\n"
    )


def test_many_registries_are_named_up_to_ten_with_brokers_first(
    hosts: str, root: KazooClient
) -> None:
    for n in range(12):
        root.ensure_path(f"/empty{n:02d}/brokers/ids")
    register(root, "/zz")
    assert error_for(hosts) == (
        f"ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /zz (1 broker "
        "registered), " + ", ".join(f"/empty{n:02d} (0 brokers registered)" for n in range(9))
        + f", ...: use zk.connect '{hosts}/zz'"
    )


def test_write_plan_without_the_chroot(hosts: str, root: KazooClient) -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_pyspark._spark.write import build_plan

    register(root, "/kafka")
    schema = StructType([StructField("value", BinaryType())])
    with pytest.raises(NoBrokersRegisteredError) as e:
        build_plan({"zk.connect": hosts, "topic": "events"}, schema)
    assert str(e.value) == (
        f"ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /kafka "
        f"(1 broker registered): use zk.connect '{hosts}/kafka'"
    )


# --- through Spark: a batch read and a stream -------------------------------------------------


@pytest.fixture
def kafka_broker(tmp_path: Path, hosts: str) -> Iterator[Any]:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    kz = kazoo_client(hosts)
    kz.ensure_path("/kafka")
    kz.stop()
    kz.close()
    with EmbeddedBroker(broker_id=0, log_dir=tmp_path / "b0", zk_connect=f"{hosts}/kafka",
                        num_partitions=2) as b:
        yield b


@pytest.mark.spark
def test_batch_read_without_the_chroot(spark: Any, kafka_broker: Any, hosts: str) -> None:
    df = spark.read.format("kafka07").option("zk.connect", hosts).option(
        "subscribe", "events").load()
    with pytest.raises(Exception) as e:
        df.collect()
    assert (
        f"ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /kafka "
        f"(1 broker registered): use zk.connect '{hosts}/kafka'"
    ) in str(e.value)


@pytest.mark.spark
def test_stream_without_the_chroot_fails(spark: Any, kafka_broker: Any, hosts: str,
                                         tmp_path: Path) -> None:
    query = (
        spark.readStream.format("kafka07").option("zk.connect", hosts)
        .option("subscribe", "events").option("startingOffsets", "earliest").load()
        .writeStream.format("memory").queryName("chroot_slip")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    with pytest.raises(Exception) as e:
        query.awaitTermination(300)
    assert f"ZooKeeper {hosts} has no node /brokers/ids: a Kafka registry is under /kafka" in (
        str(e.value)
    )
    assert query.exception() is not None
