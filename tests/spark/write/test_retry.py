"""A broker stopped in the middle of a Spark write: the task fails with a clear error, Spark's
retry (after the broker is back) completes the job, nothing is missing, duplicates are counted.

The session fixture is ``local[2]``, where ``spark.task.maxFailures`` is 1 (no retry), so this
runs its own ``local[2,4]`` session in a subprocess. The broker lives in this process; the
subprocess's input generator and this test hand over with marker files, so the broker is
stopped exactly while a write task is half way through its rows and restarted before the retry
writes (no sleeps deciding the outcome; every wait has a timeout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _cluster import count_values, read_topic

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker


pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.own_spark]

ROWS = 120_000
WAIT = 120.0

SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from kafka_pyspark import register

    zk, topic, marks, guarantee = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5]
    rows = int(sys.argv[4])

    def wait_for(name):
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(marks, name)):
            if time.monotonic() > deadline:
                raise TimeoutError(name)
            time.sleep(0.05)

    def touch(name):
        open(os.path.join(marks, name), "w").close()

    def gen(batches):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        if ctx.attemptNumber() > 0:
            touch(f"retry-{ctx.partitionId()}-{ctx.attemptNumber()}")
            wait_for("restarted")
        for i, batch in enumerate(batches):
            if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i == 6:
                touch("halfway")
                wait_for("stopped")
            yield batch

    spark = (SparkSession.builder.master("local[2,4]").appName("retry")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000").getOrCreate())
    register(spark)
    df = (spark.range(rows, numPartitions=2)
          .selectExpr("CAST(concat('r', CAST(id AS STRING), repeat('.', 150)) AS BINARY) AS value")
          .mapInArrow(gen, "value binary"))
    (df.write.format("kafka07").mode("append").option("zk.connect", zk)
       .option("topic", topic).option("max.message.size", "100000")
       .option("delivery.guarantee", guarantee).save())
    print(json.dumps({"ok": True}))
    spark.stop()
    """
)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the Spark job ended early ({proc.returncode}):\n{out}\n{err[-4000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {path.name}")
        time.sleep(0.05)


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_broker_stopped_mid_write_spark_retries(brokers: list[EmbeddedBroker], zk_connect: str,
                                                tmp_path: Path, guarantee: str) -> None:
    topic = "retried"
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(script), zk_connect, topic, str(marks), str(ROWS), guarantee],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    victim = brokers[1]
    try:
        wait_for(marks / "halfway", proc)
        victim.stop()
        (marks / "stopped").touch()
        # attempt 0 of partition 0 now fails on the stopped broker; its retry waits here
        wait_for(marks / "retry-0-1", proc)
        victim.restart()
        (marks / "restarted").touch()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-6000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"ok": True}
    # the failed attempt's error, as Spark reported it
    # exactly-once asks each broker-partition's log end before its window's intent: the
    # stopped broker fails that question, before anything of the window was sent
    failed = "DeliveryError" if guarantee == "at-least-once" else "BrokerConnectionError"
    assert failed in err and "broker 1" in err, err[-8000:]
    assert "Spark retries the task" in err
    got = count_values(read_topic(brokers, topic))
    expected = {b"r%d" % i + b"." * 150 for i in range(ROWS)}
    assert set(got) == expected  # nothing missing, nothing foreign
    duplicates = sum(got.values()) - ROWS
    print(f"duplicates after the retry ({guarantee}): {duplicates} of {ROWS} rows")
    if guarantee == "exactly-once":  # the retry read back what landed, sent only the rest
        assert duplicates == 0
        return
    assert 0 < duplicates <= ROWS  # at-least-once: only re-sent rows appear twice
    assert max(got.values()) <= 4
