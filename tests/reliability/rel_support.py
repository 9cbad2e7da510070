"""Helpers of the reliability suite (imported by its test modules)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any


def new_chroot(zk: Any) -> str:
    """A fresh chroot on ``zk``; the connect string with it."""
    from kazoo.client import KazooClient

    chroot = f"/r-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zk.connect_string, timeout=10.0)
    client.start(timeout=10.0)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return str(zk.connect_string + chroot)


def read_sink(spark: Any, sink: Path) -> list[bytes]:
    """Every value in a parquet sink directory (empty list if nothing was written)."""
    if not sink.exists() or not any(sink.glob("*.parquet")):
        return []
    return [bytes(r["value"]) for r in spark.read.parquet(str(sink)).select("value").collect()]


def values(tag: str, n: int, size: int = 24) -> list[bytes]:
    """``n`` distinct values ``tag-000000-xxx...`` of ``size`` bytes."""
    return [f"{tag}-{i:06d}-".encode().ljust(size, b"x") for i in range(n)]


def produce(
    broker: Any, topic: str, by_partition: dict[int, list[bytes]], codec: str = "none"
) -> list[bytes]:
    """Send one message set per partition straight to ``broker`` (no ZooKeeper needed) and
    confirm it with the delivery barrier; the values sent, in order."""
    from kafka_pyspark.client import Producer
    from kafka_pyspark.messages import encode_message_set

    sent: list[bytes] = []
    with Producer({broker.broker_id: (broker.host, broker.port)}, timeout=10.0) as p:
        for partition, vals in sorted(by_partition.items()):
            p.send(broker.broker_id, topic, partition, encode_message_set(vals, compression=codec))
            sent.extend(vals)
        p.flush()
    return sent


def stream_query(
    spark: Any, zk: str, checkpoint: Path, sink: Path, trigger: str = "300 milliseconds",
    **options: str,
) -> Any:
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
