"""Spark helpers shared by the benches: the local session, a null source over Arrow IPC files,
one timed ``load().write.format("noop")`` query, the best of interleaved rounds of them, and
Arrow writers that settle their workers' heap where kafka07's writer does."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def spark_session(app: str, *sources: Any, master: str = "local[2]") -> Any:
    """The benches' session (``local[2]`` unless told; settings from ``spark-conf/``, workers
    on this interpreter), with kafka07 and the data source classes ``sources`` registered."""
    os.environ.setdefault("SPARK_CONF_DIR", str(ROOT / "spark-conf"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    spark = SparkSession.builder.master(master).appName(app).getOrCreate()
    register(spark)
    for source in sources:
        spark.dataSource.register(source)
    return spark


def file_null_source(name: str, schema: Any) -> Any:
    """The ceiling: a data source ``name`` of ``schema`` yielding the batches of the IPC files in
    ``options["dir"]``, one partition per file. Local classes: cloudpickle ships them by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FilePartition(InputPartition):
        def __init__(self, index: int, path: str) -> None:
            super().__init__(index)
            self.path = path

    class FileReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.dir = options["dir"]

        def partitions(self) -> list[InputPartition]:
            names = sorted(os.listdir(self.dir))
            return [FilePartition(i, os.path.join(self.dir, n)) for i, n in enumerate(names)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            assert isinstance(partition, FilePartition)
            with pa.memory_map(partition.path) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class FileSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> Any:
            return schema

        def reader(self, schema: Any) -> FileReader:
            return FileReader(dict(self.options))

    return FileSource


def noop_seconds(spark: Any, fmt: str, options: dict[str, str]) -> float:
    """Seconds for one ``spark.read.format(fmt)...load().write.format("noop")`` query."""
    reader = spark.read.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    start = time.perf_counter()
    reader.load().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def interleaved_times(
    spark: Any, runs: dict[str, tuple[str, dict[str, str]]], rounds: int
) -> dict[str, list[float]]:
    """Every round's wall time per run (:func:`noop_seconds`), the runs interleaved round by
    round after one warm-up each, so that JVM warm-up and other load on the machine reach every
    run alike."""
    for fmt, options in runs.values():
        noop_seconds(spark, fmt, options)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (fmt, options) in runs.items():
            times[name].append(noop_seconds(spark, fmt, options))
    return times


def best_interleaved(
    spark: Any, runs: dict[str, tuple[str, dict[str, str]]], rounds: int
) -> dict[str, float]:
    """Best wall time per run of :func:`interleaved_times`."""
    return {name: min(t) for name, t in interleaved_times(spark, runs, rounds).items()}


def file_null_stream_source(name: str, schema: Any) -> Any:
    """The streaming ceiling: a stream source ``name`` that replays the IPC files in
    ``options["dir"]`` (one partition per file) in ``options["batches"]`` micro-batches (each
    file's record batches split evenly), with ``Trigger.AvailableNow`` support: what Spark's own
    micro-batch machinery costs for the same rows in as many micro-batches."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

    class SlicePartition(InputPartition):
        def __init__(self, path: str, part: int, parts: int) -> None:
            super().__init__(part)
            self.path, self.part, self.parts = path, part, parts

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, options: dict[str, str]) -> None:
            self.dir = options["dir"]
            self.batches = int(options["batches"])

        def prepareForTriggerAvailableNow(self) -> None:
            pass

        def initialOffset(self) -> dict[str, int]:
            return {"b": 0}

        def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
            return {"b": min(self.batches, start["b"] + 1)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            names = sorted(os.listdir(self.dir))
            return [SlicePartition(os.path.join(self.dir, n), b, self.batches)
                    for b in range(start["b"], end["b"]) for n in names]

        def commit(self, end: dict[str, int]) -> None:
            pass

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            assert isinstance(partition, SlicePartition)
            with pa.memory_map(partition.path) as source:
                reader = pa.ipc.open_file(source)
                n, k, parts = reader.num_record_batches, partition.part, partition.parts
                for i in range(n * k // parts, n * (k + 1) // parts):
                    yield reader.get_batch(i)

    class StreamSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> Any:
            return schema

        def streamReader(self, schema: Any) -> StreamReader:
            return StreamReader(dict(self.options))

    return StreamSource


def settled_arrow_sink(
    name: str, write: Callable[[Mapping[str, str], Iterator[Any]], None]
) -> Any:
    """A data source ``name`` whose Arrow writer runs ``write(options, batches)`` per task, its
    workers' heap frozen where kafka07's writer freezes it (creating the writer and committing,
    on the driver's side; each task), so Spark's collections after those calls cost it what they
    cost kafka07 (the ratios are about the writing). Local classes: cloudpickle ships them, and a
    ``write`` defined in a function, by value, so workers need not import bench."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class SettledWriter(DataSourceArrowWriter):
        def __init__(self, options: Mapping[str, str]) -> None:
            self.options = options

        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            from kafka_pyspark._spark import worker_gc

            worker_gc.settle(writing=True)
            write(self.options, iterator)
            return WriterCommitMessage()

        def commit(self, messages: list[WriterCommitMessage | None]) -> None:
            from kafka_pyspark._spark import worker_gc

            worker_gc.settle()  # as kafka07's: Spark runs it in a reused worker too

    class SettledSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def writer(self, schema: Any, overwrite: bool) -> SettledWriter:
            from kafka_pyspark._spark import worker_gc

            worker_gc.settle()  # as kafka07's: Spark runs it in a reused worker too
            return SettledWriter(self.options)

    return SettledSink
