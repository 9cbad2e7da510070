"""Batch read throughput: ``spark.read.format("kafka07")`` against the Spark ceiling.

Target (docs/dev/FAST-LANE.md "Performance targets"): ``load().write.format("noop")`` end to end
>= 70% of the Spark ceiling, a null Python data source that yields the same rows as pre-built Arrow
batches through the same Spark path, measured in the same run.

What is measured, all in this run, on this machine (``local[2]`` from ``spark-conf/``):

* ``read.spark.none``: ``ROWS`` messages of 200 bytes (uncompressed, magic 1) in
  ``PARTITIONS`` broker-partitions of one embedded 0.7 broker (which serves FETCH with
  ``sendfile``), read with ``spark.read.format("kafka07")`` (default ``fetch.size``, CRC checks
  on) into ``write.format("noop")``; best wall time of ``REPEAT`` runs, interleaved with the
  ceiling's runs (the JVM keeps warming up over the first runs; on a shared machine other load
  comes and goes).
* ``read.spark.null``: the ceiling: a Python data source with the same schema, the same number
  of partitions and the same batches (as many rows per batch as the reader yields, measured
  in-process below), each built once and yielded repeatedly.
* ``read.spark.gzip`` / ``read.spark.snappy``: the same messages in compressed sets of 200
  (informational: decompression is the limit there, see ``bench.decode``).
* ``read.inprocess.none``: the executor path alone (:func:`read_partition`, one Python process,
  one core, no Spark): fetch + decode + the three source columns.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.results import Recorder
from bench.spark_sources import best_interleaved, spark_session

ROWS = 1_500_000
VALUE_SIZE = 200
PARTITIONS = 2
SET_SIZE = 5000  # messages per produced message set (uncompressed)
COMPRESSED_SET = 200  # messages per compressed set, as the writer's default batch.size
REPEAT = 4
TOPICS = {"none": "bench-read", "gzip": "bench-read-gzip", "snappy": "bench-read-snappy"}
COMPRESSED_ROWS = 500_000


def _values(n: int, seed: int) -> list[bytes]:
    base = bytes((seed * 31 + i) % 251 for i in range(VALUE_SIZE * 2))
    return [base[i % VALUE_SIZE : i % VALUE_SIZE + VALUE_SIZE] for i in range(n)]


def produce(broker: Any, topic: str, rows: int, codec: str) -> None:
    """``rows`` messages of ``VALUE_SIZE`` bytes over ``PARTITIONS`` partitions."""
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark.client import Producer

    per_set = SET_SIZE if codec == "none" else COMPRESSED_SET
    sets = {seed: encode_message_set(_values(per_set, seed), compression=codec)
            for seed in range(4)}
    per_partition = rows // PARTITIONS
    with Producer({0: (broker.host, broker.port)}) as producer:
        for partition in range(PARTITIONS):
            for i in range(per_partition // per_set):
                producer.send(0, topic, partition, sets[i % 4])
            producer.flush()


def _null_source() -> Any:
    """The ceiling. A local class: cloudpickle ships it by value (workers need not import
    bench)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kafka_pyspark._spark.schema import READ_SCHEMA

    class NullPartition(InputPartition):
        def __init__(self, index: int, rows: int, per_batch: int) -> None:
            super().__init__(index)
            self.rows = rows
            self.per_batch = per_batch

    class NullReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.rows = int(options["rows"])
            self.partitions_ = int(options["partitions"])
            self.per_batch = int(options["per_batch"])

        def partitions(self) -> list[InputPartition]:
            share = self.rows // self.partitions_
            return [NullPartition(i, share, self.per_batch) for i in range(self.partitions_)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import numpy as np
            import pyarrow as pa

            from kafka_pyspark._spark.schema import ARROW_READ_SCHEMA

            assert isinstance(partition, NullPartition)
            n = partition.per_batch
            size = 10 + VALUE_SIZE
            offsets = np.arange(0, n * size, size, dtype=np.int64)
            value_offsets = np.arange(0, (n + 1) * VALUE_SIZE, VALUE_SIZE, dtype=np.int32)
            topic = b"bench-read"
            topic_offsets = np.arange(0, (n + 1) * len(topic), len(topic), dtype=np.int32)
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(topic_offsets),
                                                           pa.py_buffer(topic * n)]),
                    pa.array(np.zeros(n, np.int32)),
                    pa.array(np.full(n, partition.value, np.int32)),
                    pa.array(offsets),
                    pa.array(offsets + size),
                    pa.array(np.zeros(n, np.int32)),
                    pa.Array.from_buffers(pa.string(), n, [
                        None, pa.py_buffer(np.arange(0, (n + 1) * 4, 4, dtype=np.int32)),
                        pa.py_buffer(b"none" * n)]),
                    pa.Array.from_buffers(pa.binary(), n, [
                        None, pa.py_buffer(value_offsets),
                        pa.py_buffer(bytes(range(200)) * n)]),
                ],
                schema=ARROW_READ_SCHEMA,
            )
            full, rest = divmod(partition.rows, n)
            for _ in range(full):
                yield batch
            if rest:
                yield batch.slice(0, rest)

    class NullSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_null_read"

        def schema(self) -> Any:
            return READ_SCHEMA

        def reader(self, schema: Any) -> NullReader:
            return NullReader(dict(self.options))

    return NullSource


def inprocess_rate(broker: Any, topic: str) -> tuple[float, int]:
    """Rows/s of the executor path alone, and the most common rows per batch it yields."""
    from kafka_pyspark._options import parse_read_options
    from kafka_pyspark._spark.read.batch import plan_batch
    from kafka_pyspark._spark.read.executor import read_partition

    options = parse_read_options(
        {"broker.list": f"0:{broker.host}:{broker.port}", "subscribe": topic}
    )
    parts = plan_batch(options)
    best = float("inf")
    sizes: Counter[int] = Counter()
    for _ in range(2):
        sizes.clear()
        start = time.perf_counter()
        for p in parts:
            for b in read_partition(p):
                sizes[b.num_rows] += 1
        best = min(best, time.perf_counter() - start)
    return sum(n * k for n, k in sizes.items()) / best, sizes.most_common(1)[0][0]


def run(recorder: Recorder) -> None:
    from kafka_pyspark.testing.broker import EmbeddedBroker

    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp, EmbeddedBroker(
        0, log_dir=Path(tmp) / "b0", num_partitions=PARTITIONS, max_message_size=10_000_000
    ) as broker:
        start = time.perf_counter()
        produce(broker, TOPICS["none"], ROWS, "none")
        for codec in ("gzip", "snappy"):
            produce(broker, TOPICS[codec], COMPRESSED_ROWS, codec)
        print(f"   produced in {time.perf_counter() - start:.1f} s", flush=True)
        rate, per_batch = inprocess_rate(broker, TOPICS["none"])
        recorder.record("read.inprocess.none", rate, "rows/s",
                        note="read_partition alone: fetch + decode + columns, one core, no Spark")
        print(f"   the reader yields batches of {per_batch} rows", flush=True)
        spark = spark_session("bench-read", _null_source())
        try:
            base = {"broker.list": f"0:{broker.host}:{broker.port}"}
            null_options = {"rows": str(ROWS), "partitions": str(PARTITIONS),
                            "per_batch": str(per_batch)}
            best = best_interleaved(spark, {
                "null": ("bench_null_read", null_options),
                "none": ("kafka07", {**base, "subscribe": TOPICS["none"]}),
            }, rounds=REPEAT)
            null_rate = ROWS / best["null"]
            recorder.record("read.spark.null", null_rate, "rows/s",
                            note="Spark ceiling: pre-built Arrow batches, same schema and path")
            recorder.record("read.spark.none", ROWS / best["none"], "rows/s", limit=null_rate,
                            target=">= 70% of the Spark ceiling (read.spark.null)")
            best = best_interleaved(spark, {
                codec: ("kafka07", {**base, "subscribe": TOPICS[codec]})
                for codec in ("gzip", "snappy")
            }, rounds=2)
            for codec in ("gzip", "snappy"):
                recorder.record(f"read.spark.{codec}", COMPRESSED_ROWS / best[codec], "rows/s",
                                limit=null_rate,
                                note=f"{codec} sets of {COMPRESSED_SET}; informational")
        finally:
            spark.stop()

