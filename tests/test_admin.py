"""kafka_pyspark's cluster helpers (topic_partitions, partition_for_key, group_lag) on a real
ZooKeeper and embedded brokers; partition_for_key against the reference Java partitioner."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from _cluster import java_index

import kafka_pyspark
from kafka_pyspark._cluster import Registry
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark.cli import main
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.errors import InvalidPartitionError, OptionError, RegistryError

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

PARTITIONS = [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("key", ["customer-7", "", "héllo", "\U0001f600", "x" * 100])
def test_partition_for_key_is_javas_default_partitioner(key: str) -> None:
    expected = PARTITIONS[java_index(key, len(PARTITIONS))]
    assert kafka_pyspark.partition_for_key(key, PARTITIONS) == expected


def test_partition_for_key_refuses_what_0_7_cannot_place() -> None:
    with pytest.raises(InvalidPartitionError, match="polygenelubricants"):
        kafka_pyspark.partition_for_key("polygenelubricants", PARTITIONS)  # hash MIN_VALUE
    with pytest.raises(ValueError, match="no partitions"):
        kafka_pyspark.partition_for_key("k", [])


@pytest.mark.zk
def test_topic_partitions_and_group_lag(
    brokers: list[EmbeddedBroker], zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kafka_pyspark.topic_partitions(zk_connect, "t") == []
    for b in brokers:
        with BrokerConnection(b.host, b.port, timeout=10.0) as conn:
            conn.produce("t", 0, encode_message_set([b"a" * 7, b"b" * 7, b"c" * 7]))
            conn.barrier("t", 0)
        b.wait_for_topic("t")
    assert kafka_pyspark.topic_partitions(
        zk_connect, "t", options={"zk.sessiontimeout.ms": "4000"}) == PARTITIONS
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 0): 17, (1, 0): 51}, creator="test")
    rows = kafka_pyspark.group_lag(zk_connect, "g")
    assert [(r["broker"], r["partition"], r["offset"], r["latest"], r["lag"], r["status"])
            for r in rows] == [
        (0, 0, 17, 51, 34, "ok"),
        (0, 1, None, 0, None, "not-committed"),
        (1, 0, 51, 51, 0, "ok"),
        (1, 1, None, 0, None, "not-committed"),
        (1, 2, None, 0, None, "not-committed"),
    ]
    assert rows[0]["group"] == "g" and rows[0]["earliest"] == 0 and rows[0]["error"] is None
    # exactly the rows `kafka07 lag --json` prints
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"] == rows


@pytest.mark.zk
def test_group_lag_errors_name_what_is_missing(broker: EmbeddedBroker, zk_connect: str) -> None:
    with pytest.raises(RegistryError, match="group 'nobody' has no committed offsets"):
        kafka_pyspark.group_lag(zk_connect, "nobody")
    with pytest.raises(OptionError, match="subscribe"):
        kafka_pyspark.group_lag(zk_connect, "g", ["t"], options={"subscribe": "t"})
    with pytest.raises(OptionError, match=r"zk\.sessiontimeout\.ms"):
        kafka_pyspark.topic_partitions(zk_connect, "t", options={"zk.sessiontimeout.ms": "x"})
