"""The fault suite's streaming driver (run as a subprocess by test_exactly_once.py).

``python eo_driver.py ARGS.json``: a Spark session on ``master``; a stream from the ``kafka07``
topic ``source`` (earliest, ``maxBytesPerTrigger``) into the ``kafka07`` sink on topic
``target`` (``batch.size`` 10, the sink ``options``) with a checkpoint; runs until every input
message is processed (``processAllAvailable``), stops the query and prints ``DONE <json>``.
With ``rerun_last``, it then drops the newest micro-batch from the checkpoint's commit log and
starts the query again, which runs that micro-batch again (the state a driver killed after
the sink's commit, before Spark recorded the micro-batch, leaves).
A fault (env ``KAFKA_PYSPARK_FAULT``, set by the test) may kill it or its workers first; the
test then starts it again on the same checkpoint.

Optional stages between the source and the sink (``mapInArrow``, a Python worker of their own):

- ``random``: each row gets a random suffix (a non-deterministic input: a re-run differs);
- ``slow``: ``{"batch": b, "seconds": s}``: every attempt of a task of micro-batch ``b``
  leaves a marker ``attempt-<partition>-<attempt>`` in ``marks``; attempt 0 of the first task
  to start sleeps ``s`` seconds first (a straggler for speculative execution).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

ARROW_ROWS = 50  # rows per Arrow batch: several per task


def random_stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each value with ``~`` and 8 random hex digits appended."""
    for batch in batches:
        vals = [v + b"~" + os.urandom(4).hex().encode() for v in batch.column(0).to_pylist()]
        yield pa.RecordBatch.from_arrays([pa.array(vals, pa.binary())], ["value"])


def slow_stage(marks: str, batch: int, seconds: float) -> Any:
    """The ``slow`` stage (see the module docstring)."""

    def stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        if int(ctx.getLocalProperty("streaming.sql.batchId") or -1) == batch:
            name = f"attempt-{ctx.partitionId()}-{ctx.attemptNumber()}"
            open(os.path.join(marks, name), "w").close()
            if ctx.attemptNumber() == 0:
                try:  # the first task of the micro-batch to get here is the straggler
                    os.close(os.open(os.path.join(marks, "straggler"),
                                     os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                    time.sleep(seconds)
                except FileExistsError:
                    pass
        yield from batches

    return stage


def main(path: str) -> None:
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    args = json.loads(Path(path).read_text())
    builder = (SparkSession.builder.master(args["master"]).appName("kafka07-exactly-once")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_ROWS)))
    for k, v in args.get("conf", {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    register(spark)
    df = (spark.readStream.format("kafka07").option("zk.connect", args["zk"])
          .option("subscribe", args["source"]).option("startingOffsets", "earliest")
          .option("maxBytesPerTrigger", str(args["max_bytes"])).load().select("value"))
    if args.get("random"):
        df = df.mapInArrow(random_stage, "value binary")
    if args.get("slow"):
        slow = args["slow"]
        df = df.mapInArrow(slow_stage(args["marks"], slow["batch"], slow["seconds"]),
                           "value binary")
    writer = (df.writeStream.format("kafka07").option("zk.connect", args["zk"])
              .option("topic", args["target"]).option("batch.size", "10")
              .option("checkpointLocation", args["checkpoint"]))
    for k, v in args.get("options", {}).items():
        writer = writer.option(k, v)
    q = writer.start()
    print("STARTED", flush=True)
    q.processAllAvailable()
    last = q.lastProgress["batchId"] if q.lastProgress else -1
    q.stop()
    done: dict[str, Any] = {"last_batch": last}
    if args.get("rerun_last"):
        # the state a driver killed after the sink's commit, before Spark's commit log, leaves:
        # the newest micro-batch's commit entry gone; the query started again runs it again
        commits = Path(args["checkpoint"]) / "commits"
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        q = writer.start()
        q.processAllAvailable()
        done["rerun"] = q.lastProgress["batchId"] if q.lastProgress else -1
        q.stop()
    # one write, newline included: the child runs unbuffered (PYTHONUNBUFFERED), where print()
    # writes the text and its newline apart, and the JVM's log lines share the file
    sys.stdout.write("DONE " + json.dumps(done) + "\n")
    sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1])
