"""The fault suite's streaming driver (run as a subprocess by test_exactly_once.py).

``python eo_driver.py ARGS.json``: a Spark session on ``master``; a stream from the ``kafka07``
topic ``source`` (earliest, ``maxBytesPerTrigger``) into the ``kafka07`` sink on topic
``target`` (``batch.size`` 10, the sink ``options``) with a checkpoint; runs until every input
message is processed (``processAllAvailable``), stops the query and prints ``DONE <json>``.
A fault (env ``KAFKA_PYSPARK_FAULT``, set by the test) may kill it or its workers first; the
test then starts it again on the same checkpoint.

An optional stage between the source and the sink (``random``: ``mapInArrow``, a Python
worker of its own) gives each row a random suffix: a non-deterministic input, whose re-run
differs from the first attempt.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

ARROW_ROWS = 50  # rows per Arrow batch: several per task


def random_stage(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Each value with ``~`` and 8 random hex digits appended."""
    for batch in batches:
        vals = [v + b"~" + os.urandom(4).hex().encode() for v in batch.column(0).to_pylist()]
        yield pa.RecordBatch.from_arrays([pa.array(vals, pa.binary())], ["value"])


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
    writer = (df.writeStream.format("kafka07").option("zk.connect", args["zk"])
              .option("topic", args["target"]).option("batch.size", "10")
              .option("checkpointLocation", args["checkpoint"]))
    for k, v in args.get("options", {}).items():
        writer = writer.option(k, v)
    q = writer.start()
    print("STARTED", flush=True)
    q.processAllAvailable()
    batches = q.lastProgress["batchId"] if q.lastProgress else -1
    q.stop()
    print("DONE " + json.dumps({"last_batch": batches}), flush=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1])
