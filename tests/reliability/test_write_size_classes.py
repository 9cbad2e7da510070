"""Writes of every size class, every codec, keyed and not: exact rows read back.

Size classes, against the default ``max.message.size`` (1,000,000, the writer's and the
broker's): tiny (30 B), 20 KB (200 rows: 4 MB, more than one request may carry), 500 KB (5
rows), just under the limit (the largest value that fits: 1,000,000 bytes uncompressed; for
gzip/snappy incompressible bytes whose wrapper stays under it) and just over (one byte more
than the limit, incompressible): that one must fail with ``MessageTooLargeError`` naming the
row, and what was confirmed before it is exactly what a reader sees (nothing half-written,
nothing hidden). Half the rows carry a key (hash partitioner), half a null key (random).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rel_support import Recorder

from kafka_pyspark.testing.broker import EmbeddedBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.zk]

LIMIT = 1_000_000  # max.message.size: the writer's default and the broker's


def _compressible(tag: str, i: int, size: int) -> bytes:
    head = f"{tag}-{i:06d}-".encode()
    return (head + b"0123456789abcdef" * (size // 16 + 1))[:size]


def rows_for(sizes: str, codec: str) -> list[bytes]:
    out: list[bytes] = []
    if "tiny" in sizes:
        out += [_compressible("tiny", i, 30) for i in range(40)]
    if "20k" in sizes:
        out += [_compressible("k20", i, 20_000) for i in range(200)]
    if "500k" in sizes:
        out += [_compressible("k500", i, 500_000) for i in range(5)]
    if "under" in sizes:
        # uncompressed: exactly the limit; compressed: incompressible bytes whose wrapper
        # (inner message header + codec framing) stays under the limit
        size = LIMIT if codec == "none" else LIMIT - 4_000
        out.append(b"under-" + os.urandom(size - 6))
    return out


@pytest.fixture
def sink_broker(zk_connect: str, tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "b0", zk_connect=zk_connect, num_partitions=2,
        max_message_size=LIMIT,
    ) as b:
        yield b


def _frame(spark: SparkSession, vals: list[bytes]) -> Any:
    # keyed and not: even rows have a key (hash partitioner), odd rows a null key (random)
    data = [(f"k{i % 7}".encode() if i % 2 == 0 else None, v) for i, v in enumerate(vals)]
    return spark.createDataFrame(data, "key binary, value binary").coalesce(1)


def _write(spark: SparkSession, zk: str, topic: str, vals: list[bytes], codec: str) -> None:
    (_frame(spark, vals).write.format("kafka07").option("zk.connect", zk)
     .option("topic", topic).option("compression.codec", codec).mode("append").save())


def _read(spark: SparkSession, zk: str, topic: str) -> list[bytes]:
    df = (spark.read.format("kafka07").option("zk.connect", zk).option("subscribe", topic)
          .load())
    return [bytes(r["value"]) for r in df.select("value").collect()]


CASES = [
    pytest.param("none", "tiny+under", id="none-tiny+under"),
    pytest.param("none", "20k+500k", id="none-20k+500k"),
    pytest.param("gzip", "tiny+20k+500k+under", id="gzip-all"),
    pytest.param("snappy", "tiny+20k+500k+under", id="snappy-all"),
]


@pytest.mark.parametrize(("codec", "sizes"), CASES)
def test_write_size_classes_read_back_exactly(
    spark: SparkSession, sink_broker: EmbeddedBroker, zk_connect: str, record: Recorder,
    codec: str, sizes: str,
) -> None:
    topic = f"s{uuid.uuid4().hex[:8]}"
    sent = rows_for(sizes, codec)
    got: list[bytes] = []
    try:
        _write(spark, zk_connect, topic, sent, codec)
        sink_broker.wait_for_topic(topic)
        got = _read(spark, zk_connect, topic)
    finally:
        record(f"write {codec} {sizes}, keyed + null keys", expected=sent, got=got)
    assert sorted(got) == sorted(sent)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_write_just_over_the_limit_fails_naming_the_row(
    spark: SparkSession, sink_broker: EmbeddedBroker, zk_connect: str, record: Recorder, codec: str,
) -> None:
    """Rows 0-2 tiny, row 3 one byte over the limit (incompressible), rows 4-5 tiny: the
    save fails naming row 3; a reader then sees rows 0-2 exactly or nothing, never a part
    of row 3 nor rows after it."""
    topic = f"x{uuid.uuid4().hex[:8]}"
    before = [_compressible("pre", i, 30) for i in range(3)]
    over = b"over-" + os.urandom(LIMIT + 1 - 5)
    after = [_compressible("post", i, 30) for i in range(2)]
    with pytest.raises(Exception) as info:  # Spark wraps the writer's error
        _write(spark, zk_connect, topic, [*before, over, *after], codec)
    text = str(info.value)
    assert "MessageTooLargeError" in text, text[:2000]
    assert "row 3" in text, text[:2000]
    got: list[bytes] = []
    if topic in sink_broker.topics():
        sink_broker.wait_for_topic(topic)
        got = _read(spark, zk_connect, topic)
    record(f"write {codec} just over max.message.size", expected=before, got=got,
           detail="MessageTooLargeError naming row 3")
    assert got in ([], before) or sorted(got) == sorted(before)
