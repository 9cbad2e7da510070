"""Helpers of the reliability suite (imported by its test modules)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from kafka_pyspark.testing._zookeeper import ZooKeeperServer


Recorder = Callable[..., None]
"""The ``record`` fixture (conftest.py): ``record(scenario, expected=..., got=..., detail="")``."""


def new_chroot(zk: ZooKeeperServer) -> str:
    """A fresh chroot on ``zk``; the connect string with it."""
    return str(zk.new_chroot("r"))


def read_sink(spark: SparkSession, sink: Path) -> list[bytes]:
    """Every value in a parquet sink directory (empty list if nothing was written)."""
    if not sink.exists() or not any(sink.glob("*.parquet")):
        return []
    return [bytes(r["value"]) for r in spark.read.parquet(str(sink)).select("value").collect()]


def drain(
    spark: SparkSession, query: StreamingQuery, sink: Path, count: int, timeout: float = 30.0
) -> list[bytes]:
    """The sink's values once it holds at least ``count`` of them (or what it holds after
    ``timeout`` seconds), the query driven on meanwhile: rows a stream holds back while their
    broker is not registered arrive once it is again, not in the micro-batch that follows."""
    deadline = time.monotonic() + timeout
    while True:
        query.processAllAvailable()
        got = read_sink(spark, sink)
        if len(got) >= count or time.monotonic() >= deadline:
            return got
        time.sleep(0.3)


def values(tag: str, n: int, size: int = 24) -> list[bytes]:
    """``n`` distinct values ``tag-000000-xxx...`` of ``size`` bytes."""
    return [f"{tag}-{i:06d}-".encode().ljust(size, b"x") for i in range(n)]


def produce(
    broker: Any, topic: str, by_partition: dict[int, list[bytes]], codec: str = "none"
) -> list[bytes]:
    """Send one message set per partition straight to ``broker`` (no ZooKeeper needed) and
    confirm it with the delivery barrier; the values sent, in order."""
    from kafka_pyspark._messages import encode_message_set
    from kafka_pyspark.client import Producer

    sent: list[bytes] = []
    with Producer({broker.broker_id: (broker.host, broker.port)}, timeout=10.0) as p:
        for partition, vals in sorted(by_partition.items()):
            p.send(broker.broker_id, topic, partition, encode_message_set(vals, compression=codec))
            sent.extend(vals)
        p.flush()
    return sent


def stream_query(
    spark: SparkSession, zk: str, checkpoint: Path, sink: Path, trigger: str = "300 milliseconds",
    **options: str,
) -> StreamingQuery:
    """A started ``readStream.format('kafka07')`` -> parquet query."""
    reader = spark.readStream.format("kafka07").option("zk.connect", zk)
    for k, v in options.items():
        reader = reader.option(k, v)
    return (
        reader.load().writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(sink))
        .trigger(processingTime=trigger)
        .start()
    )


class BrokerProcess:
    """The embedded broker as a subprocess (its CLI), so a test can SIGKILL it.

    Same port and log directory across :meth:`start` calls; no ZooKeeper (``broker.list``
    mode: ``entry``). ``stop`` (also on ``with`` exit) kills it for good, bounded.
    """

    def __init__(self, log_dir: Path, *, broker_id: int = 0, partitions: int = 2,
                 extra: tuple[str, ...] = ()) -> None:
        from kafka_pyspark.testing._zookeeper import free_port

        self.log_dir = log_dir
        self.broker_id = broker_id
        self.partitions = partitions
        self.extra = extra
        self.host = "127.0.0.1"
        self.port = free_port()
        self.proc: Any = None
        self.output = log_dir.parent / f"broker-{broker_id}.out"

    @property
    def entry(self) -> str:
        return f"{self.broker_id}:{self.host}:{self.port}"

    @property
    def num_partitions(self) -> int:
        return self.partitions

    def start(self) -> BrokerProcess:
        import socket
        import subprocess
        import sys
        import time

        cmd = [sys.executable, "-m", "kafka_pyspark.testing.broker", "--port", str(self.port),
               "--host", self.host, "--log-dir", str(self.log_dir), "--broker-id",
               str(self.broker_id), "--partitions", str(self.partitions),
               "--log-level", "WARNING", *self.extra]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited: {self.output.read_text()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("broker did not listen within 30 s")

    def kill(self) -> None:
        """SIGKILL, and wait for it to be gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        self.kill()
        self.proc = None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_first_task_done(spark: SparkSession, timeout: float = 60.0) -> int:
    """Block until the running job has completed one task; the tasks still to run then."""
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None and info.numCompletedTasks >= 1:
                return int(info.numTasks - info.numCompletedTasks)
        time.sleep(0.01)
    return -1
