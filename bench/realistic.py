"""Reads of realistic data: log-normal value lengths (:mod:`bench.data`), JSON-like text.

Targets (docs/dev/FAST-LANE.md "Performance targets"), measured here as ratios in one run:

* ``read.spark.realistic.<codec>``: ``spark.read.format("kafka07")`` into the noop sink, for
  uncompressed sets and gzip and snappy sets of ``SET_SIZE`` (the writer's default
  ``batch.size``), >= 85% of ``read.spark.realistic.<codec>.null``: a null Python data source
  that yields the very same rows (captured from :func:`read_partition` in this run, re-chunked
  to Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch``), read from a memory-mapped
  Arrow IPC file, so it costs nothing but Spark's own path. The two runs are interleaved
  round by round (best of ``REPEAT``).
* ``read.inprocess.realistic.<codec>``: the executor path alone (:func:`read_partition` of
  every partition in one process of its own, one core, no Spark), against Kafka 0.7.2's own Java
  ``SimpleConsumer`` measured once on this machine (:data:`JAVA_SIMPLE_CONSUMER`, same kind of
  data, 1,000,000 messages, fetch size 1 MiB, deep iteration with CRC checks);
  ``.cpu``: that process's CPU-ms per million rows (what the executor path takes from Spark's
  cores; comparable under load, unlike rows/s).
* ``read.stream.realistic.none``: ``readStream`` from ``startingOffsets=earliest`` with
  ``maxBytesPerTrigger`` (``STREAM_TRIGGER_BYTES``), ``Trigger.AvailableNow``, into the noop
  sink: rows/s over the whole query (start to termination, micro-batch planning included; the
  query must have read every row), against the batch ceiling. ``.null``: Spark's streaming
  ceiling, a null stream source replaying the same rows in as many micro-batches (interleaved,
  best of ``STREAM_REPEAT``): what Spark's micro-batch machinery itself costs.
  ``.latestOffset``: the driver's ``latestOffset`` per micro-batch (median of the best query's
  ``StreamingQueryProgress``), where the boundary scans for ``maxBytesPerTrigger`` show.
* ``memory.executor.rss.<size>``: peak RSS (``ru_maxrss``) of a fresh Python process running
  :func:`read_partition` over one broker-partition of ``RSS_PARTITION_BYTES`` (1 GB: segment
  files written directly, the broker recovers them at start) and over one of a tenth of that:
  bounded by fetch and batch size, the two must be about equal (``.reading``: what the read
  added to the peak reached by imports and planning).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.data import realistic_values
from bench.results import Recorder
from bench.spark_sources import (
    best_interleaved,
    file_null_source,
    file_null_stream_source,
    spark_session,
)

ROWS = 1_000_000
PARTITIONS = 2
SET_SIZE = 200
REPEAT = 3
CODECS = ("none", "gzip", "snappy")
JAVA_SIMPLE_CONSUMER = {"none": 4.17e6, "gzip": 0.87e6, "snappy": 1.89e6}  # msgs/s, one thread
STREAM_TRIGGER_BYTES = 64 << 20
STREAM_REPEAT = 2
RSS_PARTITION_BYTES = 1 << 30
RSS_SEGMENT_BYTES = 256 << 20


def _topic(codec: str) -> str:
    return f"bench-real-{codec}"


def produce(broker: Any, codec: str, values: list[bytes]) -> None:
    """``values`` in sets of ``SET_SIZE``, split evenly over ``PARTITIONS`` partitions."""
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark.client import Producer

    share = len(values) // PARTITIONS
    with Producer({0: (broker.host, broker.port)}) as producer:
        for partition in range(PARTITIONS):
            part = values[partition * share : (partition + 1) * share]
            for i in range(0, len(part), SET_SIZE):
                producer.send(0, _topic(codec), partition,
                              encode_message_set(part[i : i + SET_SIZE], compression=codec))
            producer.flush()


_EXECUTOR_SCRIPT = """
import sys, time
import pyarrow as pa
from kafka_pyspark._options import parse_read_options
from kafka_pyspark._spark.read.batch import plan_batch
from kafka_pyspark._spark.read.executor import read_partition
brokers, topic, out, chunk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
parts = plan_batch(parse_read_options({"broker.list": brokers, "subscribe": topic}))
best = cpu = float("inf")
for _ in range(3):
    rows = 0
    start, start_cpu = time.perf_counter(), time.process_time()
    for p in parts:
        for b in read_partition(p):
            rows += b.num_rows
    best = min(best, time.perf_counter() - start)
    cpu = min(cpu, time.process_time() - start_cpu)
for i, p in enumerate(parts):
    table = pa.Table.from_batches(list(read_partition(p)))
    with pa.OSFile(f"{out}/{i}.arrow", "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        for batch in table.to_batches(max_chunksize=chunk):
            w.write_batch(batch)
print(rows / best, cpu / rows * 1e9)
"""


def inprocess(broker: Any, codec: str, tmp: Path, chunk: int) -> tuple[float, float, Path]:
    """Rows/s of :func:`read_partition` alone (best of three) in a process of its own (an
    executor's Python worker; the broker stays in this one), its CPU-ms per million rows
    (``time.process_time`` of that process, best of three: what the executor path takes from
    Spark's cores, load-independent; the broker's CPU is not in it), and the rows it read,
    written as one Arrow IPC file per partition in batches of ``chunk`` rows (the null
    source's input)."""
    out = tmp / f"null-{codec}"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", _EXECUTOR_SCRIPT, f"0:{broker.host}:{broker.port}",
         _topic(codec), str(out), str(chunk)], check=True, capture_output=True, text=True,
    )
    rate, cpu_ms = done.stdout.split()[-2:]
    return float(rate), float(cpu_ms), out


def _stream_seconds(
    spark: Any, fmt: str, options: dict[str, str], checkpoint: Path
) -> tuple[float, list[dict[str, Any]]]:
    """Seconds of one ``readStream`` query of ``fmt`` to its end (``AvailableNow``) and its
    progress reports; raises unless it read exactly ``ROWS`` rows (a stream starts at
    ``latest`` by default: a wrong option would time a query that reads nothing)."""
    reader = spark.readStream.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    start = time.perf_counter()
    query = (
        reader.load().writeStream.format("noop").trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint)).start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - start
    progress: list[dict[str, Any]] = list(query.recentProgress)
    rows = sum(p["numInputRows"] for p in progress)
    if rows != ROWS:
        raise RuntimeError(f"the {fmt} stream read {rows} rows, expected {ROWS}")
    return seconds, progress


def stream_rows(rec: Recorder, spark: Any, base: dict[str, str], null_dir: Path, tmp: Path,
                batch_ceiling: float) -> None:
    """The stream figure, its null-stream ceiling (as many micro-batches), interleaved."""
    kafka = {**base, "subscribe": _topic("none"), "startingOffsets": "earliest",
             "maxBytesPerTrigger": str(STREAM_TRIGGER_BYTES)}
    best: tuple[float, list[dict[str, Any]]] = (float("inf"), [])
    null_best = float("inf")
    for i in range(STREAM_REPEAT):
        run = _stream_seconds(spark, "kafka07", kafka, tmp / f"ckpt-{i}")
        best = min(best, run, key=lambda r: r[0])
        null = {"dir": str(null_dir), "batches": str(len(run[1]))}
        null_best = min(null_best, _stream_seconds(spark, "bench_null_stream", null,
                                                   tmp / f"ckpt-null-{i}")[0])
    rec.record("read.stream.realistic.none.null", ROWS / null_best, "rows/s",
               note=f"Spark's streaming ceiling: a null stream source, same rows, "
                    f"{len(best[1])} micro-batches, AvailableNow, noop")
    rec.record("read.stream.realistic.none", ROWS / best[0], "rows/s", limit=batch_ceiling,
               note=f"readStream, maxBytesPerTrigger={STREAM_TRIGGER_BYTES}, AvailableNow, noop; "
                    f"vs the batch ceiling; {ROWS / best[0] / (ROWS / null_best):.0%} of the "
                    "null stream")
    per_batch = sorted(p["durationMs"].get("latestOffset", 0) for p in best[1])
    rec.record("read.stream.realistic.none.latestOffset", per_batch[len(per_batch) // 2], "ms",
               note="driver latestOffset per micro-batch (median), incl. boundary scans")


def spark_rows(rec: Recorder, spark: Any, base: dict[str, str], nulls: dict[str, Path],
               tmp: Path) -> None:
    runs = {}
    for codec in CODECS:
        runs[f"null.{codec}"] = ("bench_null_file", {"dir": str(nulls[codec])})
        runs[codec] = ("kafka07", {**base, "subscribe": _topic(codec)})
    best = best_interleaved(spark, runs, rounds=REPEAT)
    for codec in CODECS:
        ceiling = ROWS / best[f"null.{codec}"]
        rec.record(f"read.spark.realistic.{codec}.null", ceiling, "rows/s",
                   note="Spark ceiling: a null source yielding the same rows")
        rec.record(f"read.spark.realistic.{codec}", ROWS / best[codec], "rows/s", limit=ceiling,
                   target=">= 85% of the same-run ceiling")
    stream_rows(rec, spark, base, nulls["none"], tmp, ROWS / best["null.none"])


_RSS_SCRIPT = """
import resource, sys
from kafka_pyspark._options import parse_read_options
from kafka_pyspark._spark.read.batch import plan_batch
from kafka_pyspark._spark.read.executor import read_partition
options = parse_read_options({"broker.list": sys.argv[1], "subscribe": sys.argv[2]})
parts = plan_batch(options)  # the driver's work, here only to have the partitions
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = 0
for p in parts:
    for b in read_partition(p):
        rows += b.num_rows
print(rows, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _write_partition(log_dir: Path, topic: str, size: int) -> int:
    """Segment files of ``size`` bytes in all for partition 0 of ``topic``; returns messages."""
    from kafka_pyspark._messages import encode_message_set

    values = realistic_values(4000, seed=99)
    chunk = encode_message_set(values)
    directory = log_dir / f"{topic}-0"
    directory.mkdir(parents=True)
    copies = max(1, size // len(chunk))
    per_segment = max(1, RSS_SEGMENT_BYTES // len(chunk))
    offset = 0
    written = 0
    while written < copies:
        n = min(per_segment, copies - written)
        with open(directory / f"{offset:020d}.kafka", "wb") as f:
            for _ in range(n):
                f.write(chunk)
        offset += n * len(chunk)
        written += n
    return copies * len(values)


def rss_rows(rec: Recorder, tmp: Path) -> None:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    log_dir = tmp / "rss"
    sizes = {"1GB": RSS_PARTITION_BYTES, "100MB": RSS_PARTITION_BYTES // 10}
    expected = {label: _write_partition(log_dir, f"bench-rss-{label}", size)
                for label, size in sizes.items()}
    try:
        with EmbeddedBroker(0, log_dir=log_dir, log_file_size=RSS_SEGMENT_BYTES) as broker:
            for label in sizes:
                out = subprocess.run(
                    [sys.executable, "-c", _RSS_SCRIPT, f"0:{broker.host}:{broker.port}",
                     f"bench-rss-{label}"], check=True, capture_output=True, text=True,
                ).stdout.split()
                rows, before, peak = (int(x) for x in out)
                if rows != expected[label]:
                    raise RuntimeError(f"rss read {rows} rows, expected {expected[label]}")
                rec.record(f"memory.executor.rss.{label}", peak / 1024, "MiB",
                           note=f"peak RSS of a process reading a {label} partition "
                                f"({rows} rows), default fetch and batch sizes")
                rec.record(f"memory.executor.rss.{label}.reading", (peak - before) / 1024,
                           "MiB", note="what reading added to the peak after imports and "
                                       "planning")
    finally:
        import shutil

        shutil.rmtree(log_dir, ignore_errors=True)


def run(rec: Recorder) -> None:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="bench-real-") as name:
        tmp = Path(name)
        rss_rows(rec, tmp)
        values = realistic_values(ROWS)
        with EmbeddedBroker(0, log_dir=tmp / "b0", num_partitions=PARTITIONS,
                            max_message_size=10_000_000) as broker:
            start = time.perf_counter()
            for codec in CODECS:
                produce(broker, codec, values)
            print(f"   produced in {time.perf_counter() - start:.1f} s", flush=True)
            del values
            from kafka_pyspark._spark.schema import READ_SCHEMA

            spark = spark_session(
                "bench-realistic", file_null_source("bench_null_file", READ_SCHEMA),
                file_null_stream_source("bench_null_stream", READ_SCHEMA),
            )
            try:
                chunk = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
                nulls = {}
                for codec in CODECS:
                    rate, cpu_ms, nulls[codec] = inprocess(broker, codec, tmp, chunk)
                    rec.record(f"read.inprocess.realistic.{codec}", rate, "msgs/s",
                               limit=JAVA_SIMPLE_CONSUMER[codec],
                               target="ahead of Kafka 0.7.2's Java SimpleConsumer (limit column)",
                               note="read_partition alone, one core, no Spark")
                    rec.record(f"read.inprocess.realistic.{codec}.cpu", cpu_ms,
                               "CPU-ms/M rows", note="read_partition's own CPU (process_time), "
                               "best of three; the broker's not included")
                base = {"broker.list": f"0:{broker.host}:{broker.port}"}
                spark_rows(rec, spark, base, nulls, tmp)
            finally:
                spark.stop()
