"""The streaming source against real ZooKeeper, embedded brokers and a local Spark."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from _cluster import kazoo_client

from kafka_pyspark._messages import encode_message_set
from kafka_pyspark._spark.compat import ADMISSION_CONTROL
from kafka_pyspark.client import Producer
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.spark, pytest.mark.zk]

Row = tuple[str, int, int, int, bytes]  # topic, broker, partition, offset, value


def produce(
    brokers: Sequence[EmbeddedBroker],
    topic: str,
    batches: Iterable[tuple[int, int, list[bytes], str]],
) -> None:
    """Write ``(broker id, partition, values, compression)`` message sets and confirm them."""
    by_id = {b.broker_id: b for b in brokers}
    with Producer({b.broker_id: (b.host, b.port) for b in brokers}, timeout=10.0) as p:
        for broker_id, partition, values, compression in batches:
            p.send(broker_id, topic, partition, encode_message_set(values, compression=compression))
        p.flush()
    for b in by_id.values():
        if b.running and topic in b.topics():
            b.wait_for_topic(topic)


def payloads(prefix: str, n: int, size: int = 20) -> list[bytes]:
    return [f"{prefix}-{i:06d}-".encode().ljust(size, b"x") for i in range(n)]


def stream_df(spark: Any, zk: str, **options: str) -> Any:
    reader = spark.readStream.format("kafka07").option("zk.connect", zk)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def rows_of(df: Any) -> list[Row]:
    return sorted(
        (r["topic"], r["broker"], r["partition"], r["offset"], bytes(r["value"]))
        for r in df.select("topic", "broker", "partition", "offset", "value").collect()
    )


def offsets_log(checkpoint: Path) -> list[dict[str, Any]]:
    """The source offsets Spark logged per micro-batch (checkpoint/offsets/N), in order."""
    out = []
    d = checkpoint / "offsets"
    for f in sorted((p for p in d.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        lines = f.read_text().splitlines()
        out.append(json.loads(lines[-1]))
    return out


def run_available_now(df: Any, checkpoint: Path, sink: Path, timeout: float = 120.0) -> Any:
    q = (
        df.writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(sink))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(timeout), "availableNow query did not finish"
    if q.exception() is not None:
        raise AssertionError(f"query failed: {q.exception()}")
    return q


class Writer(threading.Thread):
    """Keeps producing to every broker-partition, cycling codecs, until ``rounds`` are done.

    ``pause`` (an Event) holds it between rounds; ``written`` lists every value sent (only
    after the producer's delivery barrier confirmed it).
    """

    CODECS = ("none", "gzip", "snappy")

    def __init__(
        self,
        brokers: Sequence[EmbeddedBroker],
        topic: str,
        rounds: int,
        per_set: int = 7,
        tag: str = "w",
    ) -> None:
        super().__init__(daemon=True)
        self.brokers = list(brokers)
        self.topic = topic
        self.rounds = rounds
        self.per_set = per_set
        self.tag = tag
        self.written: list[bytes] = []
        self.error: BaseException | None = None
        self.go = threading.Event()
        self.go.set()
        self.progress = threading.Semaphore(0)

    def run(self) -> None:
        try:
            for r in range(self.rounds):
                self.go.wait(60)
                batches = []
                for b in self.brokers:
                    for p in range(b.num_partitions):
                        vals = payloads(f"{self.tag}{r}-{b.broker_id}-{p}", self.per_set)
                        codec = self.CODECS[(r + p + b.broker_id) % 3]
                        batches.append((b.broker_id, p, vals, codec))
                produce(self.brokers, self.topic, batches)
                for _, _, vals, _ in batches:
                    self.written.extend(vals)
                self.progress.release()
                time.sleep(0.05)
        except BaseException as e:
            self.error = e


def values_of(df: Any) -> list[bytes]:
    return sorted(bytes(r["value"]) for r in df.select("value").collect())


def start_query(df: Any, checkpoint: Path, sink: Path, trigger: str = "300 milliseconds") -> Any:
    return (
        df.writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(sink))
        .trigger(processingTime=trigger)
        .start()
    )


def test_concurrent_producer_all_codecs_and_restart(
    spark: Any, brokers: list[EmbeddedBroker], zk_connect: str, tmp_path: Path
) -> None:
    """A query reads while a producer writes (none/gzip/snappy, two brokers); it is stopped
    and restarted on the same checkpoint mid-stream: the file sink holds every produced
    message exactly once."""
    topic = f"c{uuid.uuid4().hex[:8]}"
    # the topic exists before the query starts, so startingOffsets=latest begins at 0 for
    # every broker-partition only if nothing was written yet: write one marker round first
    produce(brokers, topic, [(b.broker_id, 0, [b"before"], "none") for b in brokers])
    writer = Writer(brokers, topic, rounds=12)
    cp, sink = tmp_path / "cp", tmp_path / "sink"
    df = stream_df(spark, zk_connect, subscribe=topic)  # default startingOffsets: latest
    q = start_query(df, cp, sink)
    try:
        q.processAllAvailable()
        writer.start()
        for _ in range(4):
            assert writer.progress.acquire(timeout=60)
        q.processAllAvailable()
        assert q.lastProgress is not None
    finally:
        q.stop()
    assert q.exception() is None
    q2 = start_query(stream_df(spark, zk_connect, subscribe=topic), cp, sink)
    try:
        writer.join(120)
        assert not writer.is_alive() and writer.error is None, writer.error
        q2.processAllAvailable()
    finally:
        q2.stop()
    assert q2.exception() is None
    got = values_of(spark.read.parquet(str(sink)))
    assert b"before" not in got  # startingOffsets=latest
    assert got == sorted(writer.written)
    assert len(got) == 12 * 5 * 7


@pytest.mark.skipif(not ADMISSION_CONTROL, reason="availableNow in several micro-batches "
                    "needs Spark 4.2 (4.0/4.1: test_available_now_on_spark_without_*)")
def test_max_bytes_per_trigger_micro_batches(
    spark: Any, broker: EmbeddedBroker, zk_connect: str, tmp_path: Path
) -> None:
    """availableNow + maxBytesPerTrigger: several micro-batches within the limit, one single
    message larger than it alone, every end offset a message boundary; a second run on the
    same checkpoint reads only what came after."""
    topic = f"m{uuid.uuid4().hex[:8]}"
    limit = 1500
    big = bytes(range(256)) * 12  # one message of 3072 + 10 bytes
    produce(
        [broker],
        topic,
        [
            (0, 0, payloads("p0", 60, 40), "none"),
            (0, 1, payloads("p1", 20, 40), "gzip"),
            (0, 1, [big], "none"),
            (0, 1, payloads("p1b", 20, 40), "snappy"),
        ],
    )
    cp, sink = tmp_path / "cp", tmp_path / "sink"
    df = stream_df(
        spark, zk_connect, subscribe=topic, startingOffsets="earliest",
        maxBytesPerTrigger=str(limit),
    )
    q = run_available_now(df, cp, sink)
    table = spark.read.parquet(str(sink))
    got = table.select("partition", "offset", "next_offset", "value").collect()
    assert sorted(bytes(r["value"]) for r in got) == sorted(
        payloads("p0", 60, 40) + payloads("p1", 20, 40) + [big] + payloads("p1b", 20, 40)
    )
    # message boundaries of each partition: every offset and next_offset seen
    bounds: dict[str, set[int]] = {"0-0": {0}, "0-1": {0}}
    sizes: dict[tuple[str, int], int] = {}
    for r in got:
        key = f"0-{r['partition']}"
        bounds[key] |= {r["offset"], r["next_offset"]}
        sizes[(key, r["offset"])] = r["next_offset"] - r["offset"]
    logged = [o[topic] for o in offsets_log(cp)]
    assert len(logged) >= 4
    prev = {"0-0": 0, "0-1": 0}
    oversize = 0
    for end in logged:
        moved = {k: end[k] - prev.get(k, 0) for k in end if end[k] != prev.get(k, 0)}
        assert all(end[k] in bounds[k] for k in end), "an end offset inside a message"
        if sum(moved.values()) > limit:
            oversize += 1
            (key,) = moved  # alone ...
            assert moved[key] == sizes[(key, prev[key])] == len(big) + 10  # ... one message
        prev = end
    assert oversize == 1
    # the progress reports show the same limits
    rows = [p["numInputRows"] for p in q.recentProgress]
    assert sum(rows) == len(got)

    # restart on the same checkpoint after more data: only the new messages
    produce([broker], topic, [(0, 0, payloads("late", 5, 40), "gzip")])
    run_available_now(df, cp, sink)
    again = values_of(spark.read.parquet(str(sink)))
    assert len(again) == len(got) + 5
    assert len(set(again)) == len(again)


def moved_per_batch(checkpoint: Path, topic: str) -> list[int]:
    """Bytes each logged micro-batch admitted (its end minus the previous end; 0 before)."""
    prev: dict[str, int] = {}
    out = []
    for end in (o[topic] for o in offsets_log(checkpoint)):
        out.append(sum(v - prev.get(k, 0) for k, v in end.items()))
        prev = end
    return out


def test_max_bytes_per_trigger_bounds_processing_time_micro_batches(
    spark: Any, broker: EmbeddedBroker, zk_connect: str, tmp_path: Path
) -> None:
    """maxBytesPerTrigger with a processing-time trigger, on every Spark 4 (on 4.0/4.1 the
    source applies it itself): every micro-batch at most the limit, the first one after a
    restart from the checkpoint included; every message exactly once."""
    topic = f"p{uuid.uuid4().hex[:8]}"
    limit = 700
    first = [(0, 0, payloads("a", 40, 40), "none"), (0, 1, payloads("b", 30, 40), "gzip")]
    produce([broker], topic, first)
    cp, sink = tmp_path / "cp", tmp_path / "sink"
    opts = {"subscribe": topic, "startingOffsets": "earliest",
            "maxBytesPerTrigger": str(limit)}
    q = start_query(stream_df(spark, zk_connect, **opts), cp, sink, trigger="100 milliseconds")
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    before = len(offsets_log(cp))
    produce([broker], topic, [(0, 0, payloads("c", 30, 40), "snappy")])
    q = start_query(stream_df(spark, zk_connect, **opts), cp, sink, trigger="100 milliseconds")
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None
    moved = moved_per_batch(cp, topic)
    assert len(moved) > before >= 4
    assert all(m <= limit for m in moved), moved
    assert sum(moved) == sum(broker.log_end(topic, p) or 0 for p in (0, 1)) > 0
    got = values_of(spark.read.parquet(str(sink)))
    assert got == sorted(payloads("a", 40, 40) + payloads("b", 30, 40) + payloads("c", 30, 40))


@pytest.mark.skipif(ADMISSION_CONTROL, reason="Spark 4.0/4.1 only (4.2: "
                    "test_commit_to_group_then_resume_from_group)")
def test_available_now_on_spark_without_admission_control(
    spark: Any, broker: EmbeddedBroker, zk_connect: str, zookeeper: Any, tmp_path: Path
) -> None:
    """Spark 4.0/4.1 run Trigger.AvailableNow as one micro-batch: to the log ends seen at the
    start, or with maxBytesPerTrigger at most that many bytes, the rest in the next runs; with
    commitToGroup a run writes the end of the run before it (Spark asks the source nothing
    after its one micro-batch). Every message exactly once."""
    topic = f"n{uuid.uuid4().hex[:8]}"
    group = f"grp{uuid.uuid4().hex[:6]}"
    produce([broker], topic, [(0, 0, payloads("a", 40, 30), "none"),
                              (0, 1, payloads("b", 10, 30), "gzip")])
    chroot = zk_connect[len(zookeeper.connect_string):]
    kz = kazoo_client(zookeeper.connect_string + chroot)

    def group_nodes() -> dict[str, int]:
        base = f"/consumers/{group}/offsets/{topic}"
        if not kz.exists(base):
            return {}
        return {k: int(kz.get(f"{base}/{k}")[0]) for k in kz.get_children(base)}

    cp, sink = tmp_path / "cp", tmp_path / "sink"
    opts = {"subscribe": topic, "startingOffsets": "earliest", "maxBytesPerTrigger": "500",
            "commitToGroup": "true", "group.id": group}
    df = stream_df(spark, zk_connect, **opts)
    ends: list[dict[str, int]] = []
    try:
        for run in range(3):
            run_available_now(df, cp, sink)
            logged = [o[topic] for o in offsets_log(cp)]
            assert len(logged) == run + 1  # one micro-batch per run
            assert moved_per_batch(cp, topic)[-1] <= 500
            assert group_nodes() == (ends[-1] if ends else {})  # the run before's end
            ends.append(logged[-1])
        # without maxBytesPerTrigger: one micro-batch to the log ends seen at the start
        unbounded = {k: v for k, v in opts.items() if k != "maxBytesPerTrigger"}
        run_available_now(stream_df(spark, zk_connect, **unbounded), cp, sink)
        final = offsets_log(cp)[-1][topic]
        assert final == {"0-0": broker.log_end(topic, 0), "0-1": broker.log_end(topic, 1)}
        assert group_nodes() == ends[-1]
    finally:
        kz.stop()
        kz.close()
    got = values_of(spark.read.parquet(str(sink)))
    assert got == sorted(payloads("a", 40, 30) + payloads("b", 10, 30))


def test_topology_changes_mid_query(
    spark: Any, tmp_path: Path, zk_connect: str
) -> None:
    """subscribePattern: a new broker and a new matching topic appear while the query runs;
    their data is read from the earliest offset (written before the query saw them)."""
    base = f"t{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(0, log_dir=tmp_path / "b0", zk_connect=zk_connect) as b0:
        produce([b0], f"{base}-a", [(0, 0, payloads("a0", 10), "none")])
        df = stream_df(spark, zk_connect, subscribePattern=f"{base}-.*",
                       startingOffsets="earliest")
        q = (
            df.writeStream.format("memory").queryName(f"topo_{base}")
            .trigger(processingTime="300 milliseconds").start()
        )
        try:
            q.processAllAvailable()
            with EmbeddedBroker(
                1, log_dir=tmp_path / "b1", zk_connect=zk_connect, num_partitions=2
            ) as b1:
                produce([b0, b1], f"{base}-a", [(1, 1, payloads("a1", 10), "snappy")])
                produce([b0, b1], f"{base}-b", [(0, 0, payloads("b0", 4), "gzip"),
                                                 (1, 0, payloads("b1", 3), "none")])
                deadline = time.monotonic() + 90
                want = sorted(payloads("a0", 10) + payloads("a1", 10) + payloads("b0", 4)
                              + payloads("b1", 3))
                got: list[bytes] = []
                while time.monotonic() < deadline:
                    q.processAllAvailable()
                    got = values_of(spark.table(f"topo_{base}"))
                    if len(got) >= len(want):
                        break
                    time.sleep(0.5)
                assert got == want
                rows = spark.table(f"topo_{base}").select("topic", "broker", "partition")
                assert {tuple(r) for r in rows.collect()} == {
                    (f"{base}-a", 0, 0), (f"{base}-a", 1, 1), (f"{base}-b", 0, 0),
                    (f"{base}-b", 1, 0),
                }
                q.stop()
        finally:
            q.stop()
    assert q.exception() is None


@pytest.mark.skipif(not ADMISSION_CONTROL, reason="Spark < 4.2 runs availableNow as one "
                    "micro-batch (test_available_now_on_spark_without_admission_control)")
def test_commit_to_group_then_resume_from_group(
    spark: Any, broker: EmbeddedBroker, zk_connect: str, zookeeper: Any, tmp_path: Path
) -> None:
    """commitToGroup: while micro-batch N runs, ZooKeeper holds the end of N-1 (decimal
    bytes, 0.7's format); after the query, the final end. A second query with
    startingOffsets=group starts exactly there."""

    topic = f"g{uuid.uuid4().hex[:8]}"
    group = f"grp{uuid.uuid4().hex[:6]}"
    produce([broker], topic, [(0, 0, payloads("a", 40, 30), "none"),
                              (0, 1, payloads("b", 30, 30), "gzip")])
    chroot = zk_connect[len(zookeeper.connect_string):]
    kz = kazoo_client(zookeeper.connect_string + chroot)
    seen: list[tuple[int, dict[str, bytes | None]]] = []

    def node(key: str) -> bytes | None:
        path = f"/consumers/{group}/offsets/{topic}/{key}"
        return kz.get(path)[0] if kz.exists(path) else None

    def record(batch: Any, batch_id: int) -> None:
        seen.append((batch_id, {k: node(k) for k in ("0-0", "0-1")}))
        batch.write.mode("append").parquet(str(tmp_path / "sink"))

    opts = {"subscribe": topic, "startingOffsets": "earliest", "maxBytesPerTrigger": "600",
            "commitToGroup": "true", "group.id": group}
    try:
        q = (
            stream_df(spark, zk_connect, **opts).writeStream.foreachBatch(record)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True).start()
        )
        assert q.awaitTermination(180)
        assert q.exception() is None
        logged = [o[topic] for o in offsets_log(tmp_path / "cp")]
        assert len(logged) >= 3
        assert seen[0][1] == {"0-0": None, "0-1": None}
        for (batch_id, nodes), prev in zip(seen[1:], logged, strict=False):
            assert nodes == {k: str(v).encode() for k, v in prev.items()}, batch_id
        final = logged[-1]
        assert final == {"0-0": broker.log_end(topic, 0), "0-1": broker.log_end(topic, 1)}
        assert {k: node(k) for k in final} == {k: str(v).encode() for k, v in final.items()}
    finally:
        kz.stop()
        kz.close()

    produce([broker], topic, [(0, 1, payloads("after", 3, 30), "snappy")])
    df = stream_df(spark, zk_connect, subscribe=topic, startingOffsets="group",
                   **{"group.id": group})
    run_available_now(df, tmp_path / "cp2", tmp_path / "sink2")
    assert values_of(spark.read.parquet(str(tmp_path / "sink2"))) == payloads("after", 3, 30)


def test_broker_restart_mid_query(
    spark: Any, broker: EmbeddedBroker, zk_connect: str, tmp_path: Path
) -> None:
    """A broker restarted while the query runs and a producer writes: the query goes on and
    the sink ends with every message exactly once (or the query fails with a clear error:
    never a silent gap)."""
    topic = f"b{uuid.uuid4().hex[:8]}"
    produce([broker], topic, [(0, 0, [b"first"], "none")])
    cp, sink = tmp_path / "cp", tmp_path / "sink"
    df = stream_df(spark, zk_connect, subscribe=topic, startingOffsets="earliest")
    q = start_query(df, cp, sink, trigger="200 milliseconds")
    writer = Writer([broker], topic, rounds=10, tag="r")
    try:
        q.processAllAvailable()
        writer.start()
        assert writer.progress.acquire(timeout=60)
        writer.go.clear()  # no produce while the broker is down
        broker.restart()
        broker.wait_for_topic(topic)
        writer.go.set()
        writer.join(120)
        assert writer.error is None, writer.error
        q.processAllAvailable()
    except Exception:
        # a failure must be a clear one, naming the broker
        err = q.exception()
        if err is None:
            raise
        assert "broker" in str(err).lower()
        return
    finally:
        q.stop()
    assert q.exception() is None
    got = values_of(spark.read.parquet(str(sink)))
    assert got == sorted([b"first", *writer.written])
