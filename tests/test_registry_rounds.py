"""The registry is read in a fixed number of ZooKeeper round trips whatever the number of
topics: a batch read's planning and a stream's first and later micro-batches, for
``subscribe``, ``subscribePattern``, ``assign`` and ``startingOffsets=group``. A round trip is
one pipelined call of the session (``ZkSession._pipeline``): its requests go out together."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.messages import encode_message_set
from kafka_pyspark.registry import Registry
from kafka_pyspark.spark.compat import ReadAllAvailable
from kafka_pyspark.spark.options import parse_read_options
from kafka_pyspark.spark.reader import plan_batch
from kafka_pyspark.spark.schema import READ_SCHEMA
from kafka_pyspark.spark.stream import Kafka07StreamReader
from kafka_pyspark.testing.broker import EmbeddedBroker
from kafka_pyspark.zk_session import ZkSession

pytestmark = pytest.mark.zk

TOPICS = [f"r-{i:02d}" for i in range(50)]
SIZE = len(encode_message_set([b"value"]))


@pytest.fixture
def cluster(brokers: list[EmbeddedBroker], zk_connect: str) -> str:
    """Every topic of ``TOPICS`` on both brokers, one message in partition 0 of each; group
    ``g`` committed offset 0 of every partition."""
    for b in brokers:
        with BrokerConnection(b.host, b.port, timeout=10.0) as conn:
            for topic in TOPICS:
                conn.produce(topic, 0, encode_message_set([b"value"]))
            conn.barrier(TOPICS[-1], 0)
        for topic in TOPICS:
            b.wait_for_topic(topic)
    with Registry(zk_connect) as registry:
        registry.commit_group_offsets_of(
            "g", {t: {(b.broker_id, p): 0 for b in brokers for p in range(b.num_partitions)}
                  for t in TOPICS}, creator="test")
    return zk_connect


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What each ZooKeeper round trip did (``"listing"``, ``"reading"``, ...), in order."""
    seen: list[str] = []
    real = ZkSession._pipeline

    def spy(self: ZkSession, what: str, where: str, requests: Any, expected: Any) -> Any:
        seen.append(what)
        return real(self, what, where, requests, expected)

    monkeypatch.setattr(ZkSession, "_pipeline", spy)
    yield seen


def subscriptions(topics: list[str]) -> dict[str, dict[str, str]]:
    """Each way to name ``topics``."""
    return {
        "subscribe": {"subscribe": ",".join(topics)},
        "subscribePattern": {"subscribePattern": "|".join(topics)},
        "assign": {"assign": json.dumps({t: ["0-0", "1-0"] for t in topics})},
        "group": {"subscribe": ",".join(topics), "startingOffsets": "group", "group.id": "g"},
    }


def counted(rounds: list[str], fn: Callable[[], object]) -> tuple[list[str], object]:
    rounds.clear()
    result = fn()
    return list(rounds), result


def test_batch_planning_rounds_do_not_grow_with_topics(cluster: str, rounds: list[str]) -> None:
    one, many = subscriptions(TOPICS[:1]), subscriptions(TOPICS)
    for mode in one:
        runs = []
        for options in (one[mode], many[mode]):
            opts = parse_read_options({"zk.connect": cluster, **options}, "batch")
            runs.append(counted(rounds, partial(plan_batch, opts)))
        (few, planned_one), (lots, planned_many) = runs
        assert isinstance(planned_one, list) and isinstance(planned_many, list)
        ranges = [r for part in planned_many for r in part.ranges]
        assert len(ranges) == 2 * len(TOPICS), mode  # partition 0 of each broker holds data
        assert few == lots, mode
        assert len(few) <= (5 if mode == "group" else 3), (mode, few)


def test_stream_rounds_do_not_grow_with_topics(cluster: str, rounds: list[str]) -> None:
    one, many = subscriptions(TOPICS[:1]), subscriptions(TOPICS)
    for mode in one:
        seen = []
        for topics, options in ((TOPICS[:1], one[mode]), (TOPICS, many[mode])):
            reader = Kafka07StreamReader({"zk.connect": cluster, **options}, READ_SCHEMA)
            first, start = counted(rounds, reader.initialOffset)
            assert isinstance(start, dict) and sorted(start) == topics, mode
            later, end = counted(rounds, partial(reader.latestOffset, start,
                                                 ReadAllAvailable()))
            assert isinstance(end, dict) and sorted(end) == topics, mode
            reader.stop()
            seen.append((first, later))
        assert seen[0] == seen[1], mode
