"""ZooKeeper with digest ACLs (issue 8): ``zk.auth`` lets the connector read the registry and
read and commit group offsets; without it (or with a wrong password) the first refused call is
a :class:`RegistryPermissionError` naming the node. The password never shows: not in errors,
logs, reprs, nor in Spark's plan strings.

The nodes are protected the way an operator would (``setAcl`` with a digest ACL, made by an
admin session), on the shared test ZooKeeper in a chroot of the test's own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import kazoo_client
from rel_support import Recorder, produce, read_sink, values

from kafka_pyspark.errors import RegistryPermissionError
from kafka_pyspark.registry import Registry
from kafka_pyspark.testing.broker import EmbeddedBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.zk]

PASSWORD = "Pw-7c1d-not-in-any-log"
AUTH = ("digest", f"spark:{PASSWORD}")
#: the same credentials as Spark options
CREDENTIALS = {"zk.auth.user": "spark", "zk.auth.password": PASSWORD}


def _admin(zk_connect: str) -> Any:
    return kazoo_client(zk_connect, auth_data=[("digest", "admin:adminpw")])


@pytest.fixture
def locked(
    zk_connect: str, tmp_path: Path
) -> Iterator[tuple[str, EmbeddedBroker, str, str]]:
    """A broker with a topic of 5 + 4 messages; then the registry is made readable only by
    ``spark`` (and ``admin``) and group G's offsets writable only by them."""
    from kazoo.security import make_digest_acl

    topic = f"acl{uuid.uuid4().hex[:6]}"
    group = f"g{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "b0", zk_connect=zk_connect, num_partitions=2
    ) as broker:
        produce(broker, topic, {0: values("p0", 5), 1: values("p1", 4)})
        broker.wait_for_topic(topic)
        admin = _admin(zk_connect)
        try:
            acl = [make_digest_acl("spark", PASSWORD, all=True),
                   make_digest_acl("admin", "adminpw", all=True)]
            for path in ("/brokers/ids", "/brokers/topics", f"/brokers/topics/{topic}"):
                admin.set_acls(path, acl)
            admin.create(f"/consumers/{group}", b"admin", acl=acl, makepath=True)
            yield zk_connect, broker, topic, group
        finally:
            admin.stop()
            admin.close()


def test_registry_with_and_without_credentials(
    locked: tuple[str, EmbeddedBroker, str, str], caplog: pytest.LogCaptureFixture,
    record: Recorder,
) -> None:
    zk, _broker, topic, group = locked
    caplog.set_level(logging.DEBUG)
    with Registry(zk, auth=AUTH) as r:
        assert set(r.brokers()) == {0}
        assert r.topic_partitions(topic) == {0: 2}
        r.commit_group_offsets(group, topic, {(0, 0): 10, (0, 1): 20}, creator="me")
        assert r.group_offsets(group, topic) == {(0, 0): 10, (0, 1): 20}
        assert PASSWORD not in repr(r)
    # the nodes created under the locked group carry its ACL, not an open one
    admin = _admin(zk)
    try:
        for path in (f"/consumers/{group}/offsets", f"/consumers/{group}/offsets/{topic}/0-0"):
            acls, _ = admin.get_acls(path)
            assert {a.id.id.split(":")[0] for a in acls} == {"spark", "admin"}, path
    finally:
        admin.stop()
        admin.close()

    errors: list[str] = []
    with Registry(zk) as r:  # no credentials
        with pytest.raises(RegistryPermissionError) as info:
            r.brokers()
        errors.append(str(info.value))
        assert "listing /brokers/ids: permission denied" in errors[-1]
        assert "no ZooKeeper credentials were given" in errors[-1]
        with pytest.raises(RegistryPermissionError) as info:
            r.commit_group_offsets(group, topic, {(0, 0): 30}, creator="me")
        errors.append(str(info.value))
        assert f"/consumers/{group}/offsets/{topic}/0-0" in errors[-1]
    with Registry(zk, auth=("digest", f"spark:wrong-{PASSWORD}")) as r:  # a wrong password
        with pytest.raises(RegistryPermissionError) as info:
            r.group_offsets(group, topic)
        errors.append(str(info.value))
        assert "the ZooKeeper credentials given lack that permission" in errors[-1]
        assert f"/consumers/{group}/offsets/{topic}" in errors[-1]
    for text in [*errors, *(rec.getMessage() for rec in caplog.records)]:
        assert PASSWORD not in text
    with Registry(zk, auth=AUTH) as r:  # the refused commit changed nothing
        assert r.group_offsets(group, topic) == {(0, 0): 10, (0, 1): 20}
    record("ZooKeeper digest ACL: registry, commit with/without zk.auth", expected=3,
           got=len(errors), detail="RegistryPermissionError x3")


@pytest.mark.spark
def test_spark_read_and_group_commit_with_acl(
    spark: SparkSession, locked: tuple[str, EmbeddedBroker, str, str], tmp_path: Path,
    record: Recorder,
) -> None:
    """A batch read and an availableNow stream with commitToGroup, through the ACLs with
    zk.auth; without it the read fails with the permission error naming the node; the
    password is in no plan string."""
    zk, broker, topic, group = locked
    expected = values("p0", 5) + values("p1", 4)
    df = (spark.read.format("kafka07").option("zk.connect", zk).options(**CREDENTIALS)
          .option("subscribe", topic).load())
    got = [bytes(r["value"]) for r in df.select("value").collect()]
    plan = df._jdf.queryExecution().toString()
    assert PASSWORD not in plan

    q = (spark.readStream.format("kafka07").option("zk.connect", zk).options(**CREDENTIALS)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("commitToGroup", "true").option("group.id", group)
         .load().writeStream.format("parquet")
         .option("checkpointLocation", str(tmp_path / "cp"))
         .option("path", str(tmp_path / "sink")).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    assert all(PASSWORD not in str(p) for p in q.recentProgress)
    streamed = read_sink(spark, tmp_path / "sink")
    with Registry(zk, auth=AUTH) as r:
        assert r.group_offsets(group, topic) == {
            (0, p): broker.log_end(topic, p) for p in range(2)
        }

    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    with pytest.raises((PySparkException, Py4JJavaError)) as info:
        (spark.read.format("kafka07").option("zk.connect", zk).option("subscribe", topic)
         .load().collect())
    text = str(info.value)
    assert "RegistryPermissionError" in text and "/brokers/ids" in text
    record("ZooKeeper digest ACL: Spark read + stream commit with zk.auth", expected=expected,
           got=got)
    record("ZooKeeper digest ACL: availableNow stream, commitToGroup", expected=expected,
           got=streamed)
    assert sorted(got) == sorted(expected)
    assert sorted(streamed) == sorted(expected)
