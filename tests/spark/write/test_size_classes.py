"""Writes of every size class through Spark, every codec; a set the broker drops is an error.

Real local Spark, real ZooKeeper, an embedded broker; every write is read back with the
low-level client and compared exactly (values as a multiset, and the log holds nothing else).
Values are random bytes (incompressible), so a compressed wrapper is about as large as its
input and the size classes mean the same for every codec.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _spark_write import read_topic, values_of, writer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = [pytest.mark.spark, pytest.mark.zk]

LIMIT = 1_000_000  # max.message.size, the writer's and the broker's default


def _values(seed: int, counts: dict[int, int]) -> list[bytes]:
    rnd = random.Random(seed)
    return [rnd.randbytes(size) for size, n in counts.items() for _ in range(n)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_every_size_class_round_trips_with_default_options(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str, codec: str
) -> None:
    # Sizes whose sets fill a request (5 x 500 KB, 30 x 100 KB, 200 x 20 KB: the writer must
    # split them, never fail with "does not fit in one request"), tiny ones, and two just under
    # max.message.size (with room for a compressed wrapper's framing around incompressible bytes).
    counts = {7: 250, 20_000: 200, 100_000: 30, 500_000: 5, LIMIT - 2_000: 2}
    if codec == "none":
        counts[LIMIT] = 1  # exactly the limit: allowed (0.7 refuses only a larger payload)
    values = _values(1, counts)
    random.Random(2).shuffle(values)
    df = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
    writer(df, zk_connect, topic="sizes", compression_codec=codec).save()
    found = read_topic([broker], "sizes")
    assert values_of(found) == Counter(values)
    assert {c for vals in found.values() for _, c in vals} == {codec}


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_just_over_max_message_size_names_the_row(
    spark: SparkSession, broker: EmbeddedBroker, zk_connect: str, codec: str
) -> None:
    values = _values(3, {20_000: 3, LIMIT + 1: 1, 10: 2})
    df = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
    with pytest.raises(Exception, match="MessageTooLargeError") as e:
        writer(df, zk_connect, topic="over", compression_codec=codec).save()
    text = str(e.value)
    assert "row 3 " in text and f"max.message.size ({LIMIT})" in text
    assert "does not fit in one request" not in text
    # Nothing from the bad row on. Uncompressed, sizes are checked per Arrow batch before any
    # of it is sent; compressed, the sets before the bad row were sent and confirmed.
    before = Counter() if codec == "none" else Counter(values[:3])
    assert values_of(read_topic([broker], "over")) == before


def test_broker_dropping_what_the_writer_allowed_fails_the_write(
    spark: SparkSession, tmp_path: Path, zk_connect: str
) -> None:
    """Writer max.message.size 3 MB, broker 1 MB. The broker drops the set
    without an answer (0.7.2); the write must fail naming where, never report success."""
    from kafka_pyspark.testing.broker import EmbeddedBroker

    values = _values(4, {1_500_000: 2})
    with EmbeddedBroker(log_dir=tmp_path / "b", zk_connect=zk_connect, num_partitions=1) as b:
        df = spark.createDataFrame([(v,) for v in values], "value binary").coalesce(1)
        with pytest.raises(Exception, match="AppendShortfallError") as e:
            writer(df, zk_connect, topic="dropped", max_message_size="3000000",
                   socket_timeout_ms="2000").save()
        text = str(e.value)
        assert "topic 'dropped' broker 0 partition 0" in text
        assert "sent 3000020 bytes" in text and "log grew by 0 bytes" in text
        assert "max.message.size" in text
        assert b.log_end("dropped", 0) in (None, 0)  # the embedded broker dropped it, as 0.7.2
