"""A streaming table reading a Kafka 0.7 topic, a materialized view over it, and a ``kafka07``
sink fed by an append flow (docs/pipelines.md). ``spark-pipelines run`` imports this file.

Where the cluster is comes from the environment (:data:`ZK_CONNECT_ENV`), what the pipeline
does from the spec's ``configuration``."""

import os

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# the pipeline's session (the CLI also passes it in as `spark`). No register(spark) here:
# Spark registers kafka07 by itself from the installed package (docs/pipelines.md)
spark = SparkSession.active()


def setting(name: str) -> str:
    """``kafka07.pipeline.<name>`` from the spec's ``configuration``."""
    key = f"kafka07.pipeline.{name}"
    value = spark.conf.get(key, None)
    if not value:
        raise ValueError(f"{key} is not set: add it to configuration in spark-pipeline.yml")
    return value


#: the environment variable naming the cluster: zk.connect, with the chroot
ZK_CONNECT_ENV = "KAFKA07_ZK_CONNECT"
ZK = os.environ.get(ZK_CONNECT_ENV, "")
if not ZK:
    raise ValueError(f"{ZK_CONNECT_ENV} is not set: export it as the cluster's zk.connect "
                     "(host:2181/chroot; `kafka07 local-cluster` prints one)")
SOURCE_TOPIC = setting("source.topic")
GROUP = setting("group.id")
SINK_TOPIC = setting("sink.topic")


@dp.table(comment="every message of the source topic, appended once per run")
def kafka07_events() -> DataFrame:
    return (
        spark.readStream.format("kafka07")
        .option("zk.connect", ZK)
        .option("subscribe", SOURCE_TOPIC)
        .option("startingOffsets", "earliest")
        .option("commitToGroup", "true")
        .option("group.id", GROUP)
        .load()
    )


@dp.materialized_view(comment="messages and log end per broker-partition")
def kafka07_events_per_partition() -> DataFrame:
    return (
        spark.read.table("kafka07_events")
        .groupBy("topic", "broker", "partition")
        .agg(F.count("*").alias("messages"), F.max("next_offset").alias("log_end"))
    )


dp.create_sink("kafka07_copy", format="kafka07", options={"zk.connect": ZK, "topic": SINK_TOPIC})


@dp.append_flow(target="kafka07_copy")
def copy_to_kafka07() -> DataFrame:
    return spark.readStream.table("kafka07_events").select("value")
