"""The driver SIGKILLed mid-stream and restarted from its checkpoint; a torn tail in the
embedded broker's newest segment.

The driver is a subprocess (``stream_driver.py``: its own Spark JVM) killed with SIGKILL as a
process group; the query is then started again on the same checkpoint (in the test's own Spark
session, to save a JVM start): the parquet sink ends with every message exactly once.

The torn tail is half a message appended to the newest segment while the broker is down (what
a crash in the middle of an append leaves): on restart the broker recovers to the last whole
message, and reads return exactly the whole messages, before and after new appends.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from rel_support import Recorder, produce, read_sink, values

from kafka_pyspark.testing.broker import EmbeddedBroker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

DRIVER = Path(__file__).with_name("stream_driver.py")


@pytest.fixture
def plain_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(broker_id=0, log_dir=tmp_path / "b0", num_partitions=2) as b:
        yield b


class Driver:
    """One run of stream_driver.py in its own process group (Python + its Spark JVM)."""

    def __init__(self, broker: EmbeddedBroker, topic: str, tmp: Path) -> None:
        self.out = open(tmp / "driver.out", "ab")  # noqa: SIM115 - closed in kill()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), broker.broker_list_entry, topic,
             str(tmp / "cp"), str(tmp / "sink")],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.out.close()


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _committed_batches(checkpoint: Path) -> int:
    d = checkpoint / "commits"
    return sum(1 for p in d.iterdir() if p.name.isdigit()) if d.exists() else 0


def _committed_offsets(checkpoint: Path) -> dict[str, Any] | None:
    """The source offset of the newest committed micro-batch (no Spark needed to read it)."""
    n = _committed_batches(checkpoint) - 1
    path = checkpoint / "offsets" / str(n)
    if n < 0 or not path.exists():
        return None
    result: dict[str, Any] = json.loads(path.read_text().splitlines()[-1])
    return result


@pytest.mark.own_spark
def test_driver_sigkill_mid_stream_resumes_from_checkpoint(
    spark: SparkSession, plain_broker: EmbeddedBroker, tmp_path: Path, record: Recorder
) -> None:
    topic = f"d{uuid.uuid4().hex[:8]}"
    sent = produce(plain_broker, topic, {0: values("a0", 200), 1: values("a1", 200)})
    first = Driver(plain_broker, topic, tmp_path)
    try:
        _wait_for(lambda: _committed_batches(tmp_path / "cp") >= 1, 180, "a first batch")
        sent += produce(plain_broker, topic, {0: values("b0", 150), 1: values("b1", 150)},
                        "snappy")
        time.sleep(0.3)  # most likely inside the next micro-batch
    finally:
        first.kill()
    killed_at = _committed_batches(tmp_path / "cp")
    sent += produce(plain_broker, topic, {0: values("c0", 100), 1: values("c1", 100)}, "gzip")
    # the restart: this test's own Spark session (a JVM start less) on the same checkpoint
    q = (spark.readStream.format("kafka07")
         .option("broker.list", plain_broker.broker_list_entry).option("subscribe", topic)
         .option("startingOffsets", "earliest").load()
         .writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "cp"))
         .option("path", str(tmp_path / "sink")).trigger(processingTime="200 milliseconds")
         .start())
    try:
        q.processAllAvailable()
        ends = {topic: {f"0-{p}": plain_broker.log_end(topic, p) for p in range(2)}}
        assert _committed_offsets(tmp_path / "cp") == ends
    finally:
        q.stop()
    got = read_sink(spark, tmp_path / "sink")
    record("driver SIGKILL mid-stream, restart from checkpoint", expected=sent, got=got,
           detail=f"killed after {killed_at} committed batch(es)")
    assert sorted(got) == sorted(sent)


def test_torn_tail_in_the_newest_segment(
    spark: SparkSession, plain_broker: EmbeddedBroker, record: Recorder
) -> None:
    topic = f"t{uuid.uuid4().hex[:8]}"
    sent = produce(plain_broker, topic, {0: values("a0", 50), 1: values("a1", 50)})
    plain_broker.stop()
    newest = plain_broker.segment_files(topic, 0)[-1]
    whole = newest.stat().st_size
    with open(newest, "ab") as f:  # half a message: a length of 200, then 37 bytes of it
        f.write(struct.pack(">i", 200) + b"\x01\x00" + b"torn" * 9)
    plain_broker.start()
    assert newest.stat().st_size == whole  # recovered to the last whole message

    def read() -> list[bytes]:
        df = (spark.read.format("kafka07").option("broker.list", plain_broker.broker_list_entry)
              .option("subscribe", topic).load())
        return [bytes(r["value"]) for r in df.select("value").collect()]

    got_before = read()
    sent += produce(plain_broker, topic, {0: values("b0", 20), 1: values("b1", 20)})
    got = read()
    record("torn tail in the newest segment, broker restarted", expected=sent, got=got)
    assert sorted(got_before) == sorted(values("a0", 50) + values("a1", 50))
    assert sorted(got) == sorted(sent)
