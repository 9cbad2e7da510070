"""Run by tests/test_wheels.py with the Python of a venv that has a built wheel installed (not
the repository): a batch write, a batch read and an ``availableNow`` stream on a local cluster
(ZooKeeper, one embedded broker, local Spark); prints what they saw as one JSON object."""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

TOPIC = "wheels"
ROWS = 60


def run(local: Any) -> dict[str, Any]:
    spark, zk = local.spark, local.zk_connect
    rows = [(f"k{i % 7}", f"value-{i:04d}".encode()) for i in range(ROWS)]
    # one write task, its rows in one order: two tasks would append to a broker-partition in
    # either order, and coalesce(1) may join its input partitions in either order; the offsets
    # of the binary and the pure run are compared
    (spark.createDataFrame(rows, "key string, value binary").coalesce(1)
     .sortWithinPartitions("value").write.format("kafka07")
     .option("zk.connect", zk).option("topic", TOPIC).option("compression.codec", "gzip")
     .mode("append").save())
    read = (spark.read.format("kafka07").option("zk.connect", zk).option("subscribe", TOPIC)
            .load().select("partition", "offset", "next_offset", "compression", "value"))
    batch = sorted((*r[:4], bytes(r[4]).decode()) for r in read.collect())
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (spark.readStream.format("kafka07").option("zk.connect", zk)
                 .option("subscribe", TOPIC).option("startingOffsets", "earliest").load()
                 .writeStream.format("memory").queryName("wheel_stream")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        streamed = sorted(bytes(r.value).decode() for r in spark.table("wheel_stream").collect())
    return {"batch": batch, "streamed": streamed}


def main() -> int:
    from kafka_pyspark._messages import encode, flat, walk
    from kafka_pyspark.testing._local import LocalCluster

    local = LocalCluster(partitions=(2,)).start()
    try:
        seen = run(local)
    finally:
        local.close()
    engines = {"walk": walk.ENGINE, "gzip_lane": flat.gzip_lane is not None,
               "encode": encode.ENGINE}
    print(json.dumps({"engines": engines, **seen}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
