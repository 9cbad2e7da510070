"""The kafka07 sink on the paths production streams take: a named query (Spark adds
``queryName`` and ``checkpointLocation`` to the sink's options) and ``foreachBatch`` writing
each micro-batch with ``df.write.format("kafka07")``; every row lands exactly once."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _cluster import count_values, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.zk]

ROWS = 120


def source_rows(spark: Any, folder: Path) -> Any:
    """A file stream of ``ROWS`` lines in two files (two micro-batches at most)."""
    folder.mkdir()
    for f in range(2):
        lines = "".join(f"k{i % 7}|{f}-{i}\n" for i in range(ROWS // 2))
        (folder / f"f{f}.txt").write_text(lines)
    return (
        spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(folder))
        .selectExpr("split(value, '[|]')[0] AS key", "value")
    )


def expected() -> Counter[bytes]:
    return Counter(f"k{i % 7}|{f}-{i}".encode() for f in range(2) for i in range(ROWS // 2))


def test_named_stream_into_the_sink(spark: Any, brokers: list[Any], zk_connect: str,
                                    tmp_path: Path) -> None:
    query = (
        source_rows(spark, tmp_path / "in").writeStream.format("kafka07")
        .queryName("copy_to_kafka07")
        .option("zk.connect", zk_connect)
        .option("topic", "named")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert query.name == "copy_to_kafka07"
    assert count_values(read_topic(brokers, "named")) == expected()


def test_foreach_batch_writes_the_topic(spark: Any, brokers: list[Any], zk_connect: str,
                                        tmp_path: Path) -> None:
    def write_batch(batch: Any, batch_id: int) -> None:
        (batch.write.format("kafka07").option("zk.connect", zk_connect)
         .option("topic", "per-batch").mode("append").save())

    query = (
        source_rows(spark, tmp_path / "in").writeStream.foreachBatch(write_batch)
        .queryName("foreach_to_kafka07")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None
    assert count_values(read_topic(brokers, "per-batch")) == expected()


def test_a_typo_stops_the_query_naming_the_option(spark: Any, zk_connect: str,
                                                  tmp_path: Path) -> None:
    writer = (
        source_rows(spark, tmp_path / "in").writeStream.format("kafka07")
        .queryName("typo")
        .option("zk.connect", zk_connect)
        .option("topic", "never")
        .option("compresion.codec", "gzip")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
    )
    expected = re.escape(
        "option 'compresion.codec': unknown option for writing; did you mean "
        "'compression.codec'?"
    )
    query = writer.start()  # Spark builds a Python sink's writer in the query, not in start()
    with pytest.raises(Exception, match=expected):
        query.awaitTermination(300)
    assert re.search(expected, str(query.exception()))
