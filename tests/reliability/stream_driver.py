"""A stand-alone streaming driver for the driver-kill scenario (run as a subprocess).

``python stream_driver.py BROKER_LIST TOPIC CHECKPOINT SINK``: a local Spark session, a
``kafka07`` stream from the earliest offset to a parquet sink on that checkpoint, run until
killed. Prints ``STARTED`` once the query runs.
"""

from __future__ import annotations

import sys


def main(broker_list: str, topic: str, checkpoint: str, sink: str) -> None:
    from pyspark.sql import SparkSession

    from kafka_pyspark import register

    spark = (SparkSession.builder.master("local[1]").appName("kafka07-driver-kill")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .getOrCreate())
    register(spark)
    q = (spark.readStream.format("kafka07").option("broker.list", broker_list)
         .option("subscribe", topic).option("startingOffsets", "earliest").load()
         .writeStream.format("parquet").option("checkpointLocation", checkpoint)
         .option("path", sink).trigger(processingTime="200 milliseconds").start())
    print("STARTED", flush=True)
    q.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
