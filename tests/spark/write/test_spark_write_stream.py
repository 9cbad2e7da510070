"""``df.writeStream.format("kafka07")``: several micro-batches, every row exactly once (no task
is retried here), and the registry refreshed per micro-batch (a new topic first goes to
partition 0 of every broker, later micro-batches use the partitions the brokers registered)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _cluster import count_values, java_index, read_topic

pytestmark = [pytest.mark.spark, pytest.mark.zk]

def add_file(folder: Path, name: str, lines: list[str]) -> None:
    tmp = folder / f".{name}.tmp"  # hidden: the file source skips it until renamed
    tmp.write_text("".join(line + "\n" for line in lines))
    tmp.rename(folder / name)


def test_stream_sink_micro_batches(spark: Any, brokers: list[Any], zk_connect: str,
                                   tmp_path: Path) -> None:
    topic = "stream-out"
    src = tmp_path / "in"
    src.mkdir()
    files = [[f"k{(f * 200 + i) % 97}|{f}-{i}" for i in range(200)] for f in range(3)]
    add_file(src, "f0.txt", files[0])
    lines = (
        spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(src))
        .selectExpr("split(value, '[|]')[0] AS key", "value")
    )
    query = (
        lines.writeStream.format("kafka07")
        .option("zk.connect", zk_connect)
        .option("topic", topic)
        .option("compression.codec", "gzip")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        first = read_topic(brokers, topic)
        # micro-batch 0: a new topic -> partition 0 of every live broker
        assert set(first) <= {(0, 0), (1, 0)}
        assert count_values(first) == Counter(
            line.encode() for line in files[0]
        )
        holders = [b for b in brokers if any(bp[0] == b.broker_id for bp in first)]
        for b in holders:
            b.wait_for_topic(topic)
        # what 0.7's producer sees once registered: every partition of the holding brokers
        bps = [(b.broker_id, p) for b in holders for p in range(b.partitions_for(topic))]
        add_file(src, "f1.txt", files[1])
        add_file(src, "f2.txt", files[2])
        query.processAllAvailable()
        assert query.exception() is None
        batches = {p["batchId"] for p in query.recentProgress if p["numInputRows"]}
        assert len(batches) >= 3  # one file per micro-batch
    finally:
        query.stop()
    found = read_topic(brokers, topic)
    everything = [line.encode() for f in files for line in f]
    assert count_values(found) == Counter(everything)
    # later micro-batches saw the refreshed registry: all partitions, Java hash routing
    later = {line.encode(): line.split("|")[0] for f in files[1:] for line in f}
    for bp, vals in found.items():
        for v in vals:
            if v in later:
                assert bp == bps[java_index(later[v], len(bps))]


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_rerun_micro_batch_appends_nothing_twice(
    spark: Any, brokers: list[Any], zk_connect: str, tmp_path: Path, kz: Any, guarantee: str
) -> None:
    """Spark runs the last micro-batch again when its commit log entry is missing (a driver
    killed between the sink's commit and Spark's): exactly-once appends nothing twice, the
    records of earlier micro-batches are gone, the re-run one's kept; at-least-once (so the
    count can fail) appends the micro-batch again."""
    topic, src, chk = f"rerun-{guarantee}", tmp_path / "in", tmp_path / "checkpoint"
    src.mkdir()
    files = [[f"{guarantee}-{f}-{i}" for i in range(150)] for f in range(2)]

    def run() -> str:
        query = (spark.readStream.format("text").option("maxFilesPerTrigger", 1)
                 .load(str(src)).writeStream.format("kafka07")
                 .option("zk.connect", zk_connect).option("topic", topic)
                 .option("batch.size", "10").option("delivery.guarantee", guarantee)
                 .option("delivery.visibility.wait.ms", "0")
                 .option("checkpointLocation", str(chk)).start())
        try:
            query.processAllAvailable()
            assert query.exception() is None
            return str(query.id)
        finally:
            query.stop()

    add_file(src, "f0.txt", files[0])
    add_file(src, "f1.txt", files[1])
    query_id = run()
    for name in ("1", ".1.crc"):  # micro-batch 1 not committed as far as Spark knows
        (chk / "commits" / name).unlink(missing_ok=True)
    assert run() == query_id  # the same query (its id is in the checkpoint)
    everything = Counter(line.encode() for f in files for line in f)
    got = count_values(read_topic(brokers, topic))
    if guarantee == "at-least-once":  # one file per micro-batch: micro-batch 1's twice
        assert set(got) == set(everything) and set(got.values()) == {1, 2}
        twice = {v for v, n in got.items() if n == 2}
        assert twice in ({line.encode() for line in f} for f in files)
        return
    assert got == everything
    # micro-batch 1's records stay (a re-run of it is a no-op); 2's node is made ahead, empty
    top = f"/kafka_pyspark/sinks/{query_id}"
    assert sorted(kz.get_children(top)) == ["1", "2"] and kz.get_children(f"{top}/2") == []
