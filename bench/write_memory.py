"""A long write stream's memory: ``memory.write.stream.*``.

A named streaming query writes ``kafka07`` to the sink broker (:mod:`bench.sink`) for
:data:`MICRO_BATCHES` micro-batches of :data:`ROWS_PER_BATCH` rows (Spark's
``rate-micro-batch`` source, 2 partitions, one micro-batch a second; values of 20 to 500
bytes), exactly-once with its records in a directory store, once per codec, on the benches'
``local[2]`` session. While it runs, the resident sets of the Python processes under Spark's
JVM (the workers that run the write tasks and the sink's driver-side calls, which keep the
encoder's reused output buffers, the producers' sockets and the records' clients between
micro-batches) and of this driver process are sampled, each sample tagged with the last
finished micro-batch. Whatever a micro-batch left behind would grow with their count. The
queries' progress must show every row of the micro-batches written, or the bench fails.

Rows (MiB):

* ``memory.write.stream.<codec>.workers``: the largest resident set of any of Spark's Python
  processes over the last :data:`WINDOW` micro-batches; its limit, the same over the
  :data:`WINDOW` micro-batches after the first :data:`WINDOW` (the warm-up: imports, the pool's
  buffers, the JIT). A ratio near 1 is no growth.
* ``memory.write.stream.<codec>.driver``: this process's resident set over the same windows
  (the sink's driver side runs in Spark's workers; this is pyspark's client side).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.results import Recorder
from bench.sink import Sink
from bench.spark_sources import spark_session

MICRO_BATCHES = 50
ROWS_PER_BATCH = 200_000
WINDOW = 10
#: a micro-batch starts every second (each takes less): the query is stopped between two, not
#: in the middle of one, where stopping interrupts its tasks
TRIGGER = "1 second"
SAMPLE_SECONDS = 0.1
CODECS = ("none", "snappy", "gzip")
TOPIC = "bench-write-memory"
# 20 digits of the row number, then 0 to 60 copies of an 8-byte filler by the row's hash:
# 20-500 bytes
_VALUE_SQL = ("CAST(concat(lpad(CAST(value AS STRING), 20, '0'), "
              "repeat('payload-', CAST(pmod(hash(value), 61) AS INT))) AS BINARY) AS value")


def _rss_mib(pid: int) -> float | None:
    """``pid``'s resident set (``VmRSS``), or None once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _python_descendants(root: int) -> list[int]:
    """The Python processes under ``root`` (the JVM's: pyspark's daemon and its workers)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        if os.path.basename(argv0).startswith(b"python"):
            found.append(pid)
    return found


class Sampler:
    """Samples (last finished micro-batch, the largest RSS of the Python processes under the
    JVM ``jvm``, this driver's RSS) in a thread every :data:`SAMPLE_SECONDS`."""

    def __init__(self, batch_id: Callable[[], int], jvm: int) -> None:
        self.batch_id, self.jvm = batch_id, jvm
        self.samples: list[tuple[int, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.wait(SAMPLE_SECONDS):
            sizes = [s for p in _python_descendants(self.jvm) if (s := _rss_mib(p)) is not None]
            driver = _rss_mib(me)
            if sizes and driver is not None:
                self.samples.append((self.batch_id(), max(sizes), driver))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def peak(self, first: int, last: int, column: int) -> float:
        """The largest sample of ``column`` (1: workers, 2: driver) taken while the last
        finished micro-batch was in ``first..last``."""
        values = [s[column] for s in self.samples if first <= s[0] <= last]
        if not values:
            raise RuntimeError(f"no memory sample taken during micro-batches {first}..{last}")
        return max(values)


def _stream(spark: Any, sink: Sink, codec: str, tmp: Path) -> Sampler:
    """One query of :data:`MICRO_BATCHES` micro-batches, sampled; stopped after its last."""
    df = (spark.readStream.format("rate-micro-batch")
          .option("rowsPerBatch", ROWS_PER_BATCH).option("numPartitions", 2).load()
          .selectExpr(_VALUE_SQL))
    query = (df.writeStream.format("kafka07").queryName(f"bench_memory_{codec}")
             .option("broker.list", sink.broker_list).option("topic", TOPIC)
             .option("compression.codec", codec)
             .option("delivery.store", str(tmp / f"store-{codec}"))
             .option("checkpointLocation", str(tmp / f"checkpoint-{codec}"))
             .trigger(processingTime=TRIGGER).start())

    def last_batch() -> int:
        progress = query.lastProgress
        return int(progress["batchId"]) if progress else -1

    sampler = Sampler(last_batch, spark.sparkContext._gateway.proc.pid)
    try:
        while last_batch() < MICRO_BATCHES - 1:
            if query.exception() is not None or not query.isActive:
                raise RuntimeError(f"the {codec} stream stopped: {query.exception()}")
            time.sleep(SAMPLE_SECONDS)
        written = sum(int(p["numInputRows"]) for p in query.recentProgress
                      if int(p["batchId"]) < MICRO_BATCHES)
    finally:
        query.stop()
        sampler.stop()
    if written != MICRO_BATCHES * ROWS_PER_BATCH:  # the rows were written, not skipped
        raise RuntimeError(f"the {codec} stream wrote {written:,} rows in {MICRO_BATCHES} "
                           f"micro-batches, expected {MICRO_BATCHES * ROWS_PER_BATCH:,}")
    return sampler


def run(recorder: Recorder) -> None:
    with Sink() as sink, tempfile.TemporaryDirectory() as tmp:
        spark = spark_session("bench-write-memory")
        try:
            for codec in CODECS:
                sampler = _stream(spark, sink, codec, Path(tmp))
                early = (WINDOW, 2 * WINDOW - 1)
                late = (MICRO_BATCHES - WINDOW, MICRO_BATCHES - 1)
                for column, part in ((1, "workers"), (2, "driver")):
                    recorder.record(
                        f"memory.write.stream.{codec}.{part}", sampler.peak(*late, column),
                        "MiB", limit=sampler.peak(*early, column),
                        note=f"micro-batches {late[0]}-{late[1]} against {early[0]}-{early[1]}, "
                             f"{ROWS_PER_BATCH:,} rows each")
        finally:
            spark.stop()
