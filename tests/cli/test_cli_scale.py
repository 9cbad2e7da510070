"""``kafka07 offsets`` and ``lag`` over many partitions: each broker's OFFSETS requests
pipelined on one connection, under a deadline that grows with the requests asked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from kafka_pyspark._cluster import Registry
from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._wire import OffsetsRequest
from kafka_pyspark.cli import main
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.client._brokers import answer_deadline_ms
from kafka_pyspark.client._connection import OFFSETS_WINDOW
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk

PARTITIONS = 300
SIZE = len(encode_message_set([b"v" * 10]))


def test_deadline_of_a_broker_grows_with_the_requests_asked() -> None:
    assert answer_deadline_ms(1000, 1) == answer_deadline_ms(1000, OFFSETS_WINDOW) == 2000
    assert answer_deadline_ms(1000, OFFSETS_WINDOW + 1) == 3000
    assert answer_deadline_ms(1000, 100 * OFFSETS_WINDOW) == 101_000


def test_offsets_and_lag_of_many_partitions(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with EmbeddedBroker(0, log_dir=tmp_path / "b", zk_connect=zk_connect,
                        num_partitions=PARTITIONS) as broker:
        with BrokerConnection(broker.host, broker.port, timeout=10.0) as conn:
            for p in (0, PARTITIONS - 1):
                conn.produce("t", p, encode_message_set([b"v" * 10]))
                conn.barrier("t", p)
        broker.wait_for_topic("t")
        calls: list[int] = []
        real = BrokerConnection.offsets_pipelined

        def spy(self: BrokerConnection, requests: Sequence[OffsetsRequest],
                answers: list[list[int]] | None = None) -> list[list[int]]:
            calls.append(len(requests))
            return real(self, requests, answers)

        monkeypatch.setattr(BrokerConnection, "offsets_pipelined", spy)
        assert main(["offsets", "--zk", zk_connect, "--topic", "t", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["partitions"]
        assert calls == [PARTITIONS]  # one per partition (its bounds), one pipelined call
        ends = {0: SIZE, PARTITIONS - 1: SIZE}
        assert rows == [{"broker": 0, "partition": p, "earliest": 0, "latest": ends.get(p, 0),
                         "error": None} for p in range(PARTITIONS)]

        with Registry(zk_connect) as registry:
            registry.commit_group_offsets("g", "t", {(0, p): 0 for p in range(PARTITIONS)},
                                          creator="test")
        calls.clear()
        assert main(["lag", "--zk", zk_connect, "--group", "g", "--json"]) == 0
        lag = {(r["broker"], r["partition"]): (r["lag"], r["status"])
               for r in json.loads(capsys.readouterr().out)["partitions"]}
        assert calls == [PARTITIONS]
        assert lag == {(0, p): (ends.get(p, 0), "ok") for p in range(PARTITIONS)}


def test_offsets_and_lag_of_a_log_retention_cut(
    tmp_path: Path, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A log whose oldest segments are gone: earliest is its oldest segment's start, whatever
    the number of segments after it, and a group behind it is ``before-log-start``."""
    from kafka_pyspark._segments.file_names import partition_dir_name, segment_file_name

    message_set = encode_message_set([b"v" * 10])
    first, size = 1000, len(message_set)
    log = tmp_path / "b" / partition_dir_name("t", 0)
    log.mkdir(parents=True)
    for i in range(3):
        (log / segment_file_name(first + i * size)).write_bytes(message_set)
    end = first + 3 * size
    with EmbeddedBroker(0, log_dir=tmp_path / "b", zk_connect=zk_connect,
                        num_partitions=2) as broker:
        broker.wait_for_topic("t")
        assert main(["offsets", "--zk", zk_connect, "--topic", "t", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["partitions"] == [
            {"broker": 0, "partition": 0, "earliest": first, "latest": end, "error": None},
            {"broker": 0, "partition": 1, "earliest": 0, "latest": 0, "error": None}]
        with Registry(zk_connect) as registry:
            registry.commit_group_offsets("g", "t", {(0, 0): 5, (0, 1): 0}, creator="test")
        assert main(["lag", "--zk", zk_connect, "--group", "g", "--json"]) == 1
        assert [(r["partition"], r["earliest"], r["latest"], r["lag"], r["status"])
                for r in json.loads(capsys.readouterr().out)["partitions"]] == [
            (0, first, end, end - 5, "before-log-start"), (1, 0, 0, 0, "ok")]
