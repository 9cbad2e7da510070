"""The ``kafka07`` operator command against a real ZooKeeper and the embedded broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_pyspark.cli import main
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.messages import encode_message_set
from kafka_pyspark.registry import Registry

# Hand-computed sizes: a magic-1 message is 4 (length) + 1 + 1 + 4 (header) + payload.
THREE = [b"a" * 7, b"b" * 7, b"c" * 7]  # 17 bytes each: log end 51


def _produce(broker: Any, topic: str, partition: int, values: list[bytes], codec: str) -> None:
    with BrokerConnection(broker.host, broker.port, timeout=10.0) as conn:
        conn.produce(topic, partition, encode_message_set(values, compression=codec))
        conn.barrier(topic, partition)


def test_offsets_by_zookeeper(broker: Any, zk_connect: str, capsys: pytest.CaptureFixture[str]):
    _produce(broker, "t", 1, THREE, "none")
    broker.wait_for_topic("t")
    assert main(["offsets", "--zk", zk_connect, "--topic", "t", "--timeout-ms", "5000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["0-0", "0", "0", "0"]
    assert lines[2].split() == ["0-1", "0", "51", "51"]


def test_offsets_by_broker_list(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _produce(broker, "t", 0, THREE[:2], "none")
    bl = f"0:{broker.host}:{broker.port}"
    assert main(["offsets", "--broker-list", bl, "--topic", "t"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["0-0", "0", "34", "34"]


def test_lag_reads_the_group_offsets(
    broker: Any, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _produce(broker, "t", 0, THREE, "none")
    broker.wait_for_topic("t")
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 0): 17}, creator="test")
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--topic", "t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["g", "0-0", "17", "51", "34"]
    assert lines[2].split() == ["g", "0-1", "-", "0", "-"]  # never committed


def test_dump_a_segment_file(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _produce(broker, "d", 0, THREE, "none")
    _produce(broker, "d", 0, [b"x", b"yy"], "gzip")
    (segment,) = broker.segment_files("d", 0)
    assert main(["dump", str(segment), "--values"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0] == "offset=0 next=17 inner=0 codec=none size=7 value=b'aaaaaaa'"
    assert lines[2] == "offset=34 next=51 inner=0 codec=none size=7 value=b'ccccccc'"
    assert lines[3].startswith("offset=51 ") and "inner=0 codec=gzip size=1 value=b'x'" in lines[3]
    assert "inner=1 codec=gzip size=2 value=b'yy'" in lines[4]
    assert len(lines) == 5


def test_dump_reports_a_torn_tail_and_corruption(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.kafka"
    seg.write_bytes(encode_message_set([b"hello"]) + b"\x00\x00\x00\x30\x01")
    assert main(["dump", str(seg)]) == 1  # torn tail: named, non-zero exit
    bad = bytearray(encode_message_set([b"hello"]))
    bad[-1] ^= 0xFF  # payload no longer matches its CRC
    seg.write_bytes(bytes(bad))
    assert main(["dump", str(seg)]) == 2  # a typed error, reported, not a traceback
