"""A broker SIGKILLed and restarted during a batch read, a stream and a write.

The broker runs as a subprocess (its CLI) so that it can be killed with SIGKILL; it keeps its
port and log directory across the restart (``broker.list`` mode, no ZooKeeper involved). The
kill is timed to land inside a running Spark job: right after its first task completed, with
more tasks still to run. Each scenario must end with exactly the right rows, or (reads) with a
clear error naming the broker; writes are at-least-once: nothing confirmed is ever missing.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rel_support import (
    BrokerProcess,
    Recorder,
    produce,
    read_sink,
    values,
    wait_first_task_done,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

BACK_AFTER_S = 0.3  # the broker is down this long, plus its own start time


@pytest.fixture
def broker_proc(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "b0", extra=("--log-file-size", "65536")) as b:
        yield b


def _kill_and_restart(spark: SparkSession, broker: BrokerProcess, wait: float = 60.0) -> int:
    """Kill once the running job completed a task (or after ``wait`` s: a micro-batch can be
    over before a poll sees it), restart; the tasks left at the kill (-1: none seen)."""
    remaining = wait_first_task_done(spark, wait)
    broker.kill()
    time.sleep(BACK_AFTER_S)
    broker.start()
    return remaining


class _Job(threading.Thread):
    """A Spark action in a thread (the test kills the broker meanwhile)."""

    def __init__(self, spark: Any, fn: Any) -> None:  # Any: run() reaches the JVM
        super().__init__(daemon=True)
        self.spark = spark
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            # a new JVM thread has no active session: Python data sources are found there
            self.spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(
                self.spark._jsparkSession
            )
            self.result = self.fn()
        except BaseException as e:
            self.error = e


def _clear(error: BaseException, broker: BrokerProcess) -> bool:
    text = str(error)
    return f"{broker.host}:{broker.port}" in text or f"broker {broker.broker_id}" in text


def test_sigkill_during_batch_read(
    spark: SparkSession, broker_proc: BrokerProcess, record: Recorder
) -> None:
    topic = f"k{uuid.uuid4().hex[:8]}"
    sent: list[bytes] = []
    # one segment per set (64 KiB segments): 12 segments, so 8+ tasks of ~75 fetches each and
    # the kill lands while most of them are still to run
    for r in range(6):
        sent += produce(broker_proc, topic, {0: values(f"r{r}p0", 300, 1000),
                                             1: values(f"r{r}p1", 300, 1000)})
    df = (spark.read.format("kafka07").option("broker.list", broker_proc.entry)
          .option("subscribe", topic).option("minPartitions", "8")
          .option("fetch.size", "4096").load())
    job = _Job(spark, lambda: [bytes(r["value"]) for r in df.select("value").collect()])
    job.start()
    remaining = _kill_and_restart(spark, broker_proc)
    job.join(180)
    assert not job.is_alive()
    got = job.result or []
    outcome = "exact rows" if job.error is None else f"error: {_error_name(job.error)}"
    record("broker SIGKILL + restart mid batch read", expected=sent, got=got,
           detail=f"{outcome}, {remaining} task(s) left at the kill")
    if job.error is not None:
        assert _clear(job.error, broker_proc), str(job.error)[:2000]
    else:
        assert sorted(got) == sorted(sent)


def test_sigkill_during_stream(
    spark: SparkSession, broker_proc: BrokerProcess, tmp_path: Path, record: Recorder
) -> None:
    topic = f"k{uuid.uuid4().hex[:8]}"
    sent = produce(broker_proc, topic, {0: values("a0", 300, 100), 1: values("a1", 300, 100)})
    q = (spark.readStream.format("kafka07").option("broker.list", broker_proc.entry)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("minPartitions", "6").option("fetch.size", "4096").load()
         .writeStream.format("parquet")
         .option("checkpointLocation", str(tmp_path / "cp"))
         .option("path", str(tmp_path / "sink"))
         .trigger(processingTime="200 milliseconds").start())
    error: BaseException | None
    try:
        remaining = _kill_and_restart(spark, broker_proc, wait=10.0)
        sent += produce(broker_proc, topic, {0: values("b0", 200, 100),
                                             1: values("b1", 200, 100)}, "gzip")
        q.processAllAvailable()
        error = q.exception()
    except Exception as e:  # the query failed: processAllAvailable re-raises
        error = e
    finally:
        q.stop()
    got = read_sink(spark, tmp_path / "sink")
    outcome = "exact rows" if error is None else f"error: {_error_name(error)}"
    record("broker SIGKILL + restart mid stream", expected=sent, got=got,
           detail=f"{outcome}, {remaining} task(s) left at the kill")
    if error is not None:
        assert _clear(error, broker_proc), str(error)[:2000]
        assert len(set(got)) == len(got) and set(got) <= set(sent)
    else:
        assert sorted(got) == sorted(sent)


def test_sigkill_during_write(
    spark: SparkSession, broker_proc: BrokerProcess, record: Recorder
) -> None:
    """At-least-once: a save() that succeeds has written every row (duplicates are
    possible and counted); one that fails says so with the delivery summary."""
    topic = f"k{uuid.uuid4().hex[:8]}"
    sent = [f"w-{i:06d}-".encode() + b"x" * 92 for i in range(16_000)]
    frame = spark.range(0, len(sent), numPartitions=16).selectExpr(
        "cast(concat('w-', lpad(cast(id as string), 6, '0'), '-', repeat('x', 92)) as binary)"
        " as value"
    )

    def save() -> None:
        (frame.write.format("kafka07").option("broker.list", broker_proc.entry)
         .option("topic", topic).option("batch.size", "50")
         .option("socket.timeout.ms", "5000").mode("append").save())

    job = _Job(spark, save)
    job.start()
    remaining = _kill_and_restart(spark, broker_proc)
    job.join(180)
    assert not job.is_alive()
    df = (spark.read.format("kafka07").option("broker.list", broker_proc.entry)
          .option("subscribe", topic).load())
    got = [bytes(r["value"]) for r in df.select("value").collect()]
    outcome = "save() ok" if job.error is None else f"save() failed: {_error_name(job.error)}"
    record("broker SIGKILL + restart mid write", expected=sent, got=got,
           detail=f"{outcome}, {remaining} task(s) left at the kill")
    assert set(got) <= set(sent)
    if job.error is None:
        assert set(got) == set(sent)  # at-least-once: nothing missing
    else:
        assert _error_name(job.error) in CLEAR_WRITE_ERRORS, str(job.error)[:2000]


# what a write that lost its broker may end with: each says what was (not) confirmed
CLEAR_WRITE_ERRORS = ("DeliveryError", "AppendShortfallError", "BrokerTimeoutError",
                      "BrokerConnectionError")
# a read's, after the connection's retries ran out before the broker was back
READ_ERRORS = ("BrokerTimeoutError", "BrokerConnectionError", "DataNotAvailableError")


def _error_name(error: BaseException) -> str:
    text = str(error)
    for name in (*CLEAR_WRITE_ERRORS, *READ_ERRORS):
        if name in text:
            return name
    return type(error).__name__
