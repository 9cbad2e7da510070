# Databricks notebook source
# MAGIC %md
# MAGIC # Streaming: a Kafka 0.7 topic -> transform -> table, with the group's lag
# MAGIC
# MAGIC `spark.readStream.format("kafka07")` with a checkpoint (exactly-once into the table),
# MAGIC `maxBytesPerTrigger` (bounded micro-batches) and `commitToGroup` (the consumed offsets
# MAGIC are written to 0.7's ZooKeeper group offsets, so 0.7's tools, and `kafka07 lag`, see
# MAGIC the pipeline's progress).
# MAGIC
# MAGIC **On Databricks**: `kafka_pyspark` as a cluster library, set the widgets. **Elsewhere**
# MAGIC the next cell starts a local ZooKeeper, two embedded brokers and Spark.

# COMMAND ----------

import os

ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ
if ON_DATABRICKS:
    dbutils.widgets.text("zk_connect", "zk1:2181/kafka")  # noqa: F821 (Databricks globals)
    dbutils.widgets.text("topic", "orders")  # noqa: F821
    dbutils.widgets.text("checkpoint", "/dbfs/tmp/kafka07/orders-checkpoint")  # noqa: F821
    ZK = dbutils.widgets.get("zk_connect")  # noqa: F821
    TOPIC = dbutils.widgets.get("topic")  # noqa: F821
    CHECKPOINT = dbutils.widgets.get("checkpoint")  # noqa: F821
    local = None
else:
    from kafka_pyspark.testing.local import LocalCluster

    local = LocalCluster(partitions=(2, 3)).start()
    spark = local.spark
    ZK, TOPIC, CHECKPOINT = local.zk_connect, "orders", local.path("checkpoint")
GROUP = "orders-to-table"
print(f"zk.connect={ZK} topic={TOPIC} group={GROUP} checkpoint={CHECKPOINT}")

# COMMAND ----------

# MAGIC %md Locally: some orders to stream (`user,amount` lines). Skipped on Databricks.

# COMMAND ----------


def produce_orders(first: int, n: int) -> None:
    (spark.range(first, first + n)
     .selectExpr("CONCAT('user-', CAST(id % 7 AS STRING)) AS key",
                 "CONCAT('user-', CAST(id % 7 AS STRING), ',', CAST(id % 100 AS STRING)) AS value")
     .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC)
     .option("compression.codec", "gzip").mode("append").save())


if local is not None:
    produce_orders(0, 5)  # a new topic: partition 0 of each broker, then all partitions exist
    for b in local.brokers:  # each registers the topic in ZooKeeper after its first write
        b.wait_for_topic(TOPIC)
    produce_orders(5, 995)

# COMMAND ----------

# MAGIC %md ## The group's lag before the pipeline ran (the group has committed nothing)

# COMMAND ----------

from dataclasses import asdict

from kafka_pyspark.cli.cluster_cmds import group_lag
from kafka_pyspark.cluster import Cluster
from kafka_pyspark.cluster_options import cluster_options


def show_lag() -> list:
    """`kafka07 lag --zk ZK --group GROUP --topic TOPIC`, as rows."""
    with Cluster(cluster_options(zk_connect=ZK)) as cluster:
        rows = group_lag(cluster, GROUP, [TOPIC])
    print("\n".join(f"{r.broker}-{r.partition}: offset={r.offset} latest={r.latest} "
                    f"lag={r.lag} {r.status}" for r in rows))
    return [asdict(r) for r in rows]


lag_before = show_lag()

# COMMAND ----------

# MAGIC %md
# MAGIC ## The pipeline
# MAGIC
# MAGIC `trigger(availableNow=True)` reads what is there now in micro-batches of at most
# MAGIC `maxBytesPerTrigger` bytes and stops; use `trigger(processingTime="1 minute")` for a
# MAGIC pipeline that keeps running. Rerunning the cell continues from the checkpoint.

# COMMAND ----------

from pyspark.sql import functions as F

stream = (spark.readStream.format("kafka07")
          .option("zk.connect", ZK)
          .option("subscribe", TOPIC)
          .option("startingOffsets", "earliest")  # first run only; then the checkpoint
          .option("maxBytesPerTrigger", 4096)
          .option("group.id", GROUP)
          .option("commitToGroup", "true")
          .load())
orders = (stream
          .select("broker", "partition", "offset", "inner_index",
                  F.split(F.col("value").cast("string"), ",").alias("f"))
          .select("broker", "partition", "offset", "inner_index",
                  F.col("f")[0].alias("user"), F.col("f")[1].cast("int").alias("amount")))

TABLE = "kafka07_orders"
TABLE_PATH = local.path(TABLE) if local is not None else None


def run_pipeline() -> int:
    w = (orders.writeStream.option("checkpointLocation", CHECKPOINT)
         .trigger(availableNow=True))
    if TABLE_PATH is None:
        query = w.toTable(TABLE)  # Delta on Databricks
    else:
        query = w.format("parquet").option("path", TABLE_PATH).start()
    query.awaitTermination()
    batches = len(query.recentProgress)
    print(f"{batches} micro-batches")
    return batches


batches = run_pipeline()

# COMMAND ----------

table = spark.table(TABLE) if TABLE_PATH is None else spark.read.parquet(TABLE_PATH)
table.groupBy("user").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount")) \
    .orderBy("user").show()
rows_in_table = table.count()

# COMMAND ----------

# MAGIC %md ## The group's lag now: the pipeline committed its offsets to ZooKeeper

# COMMAND ----------

lag_after = show_lag()

# COMMAND ----------

# MAGIC %md Locally: more orders arrive, the lag grows; the next run catches up.

# COMMAND ----------

if local is not None:
    produce_orders(1000, 200)
    lag_grown = show_lag()
    run_pipeline()
    rows_in_table = (spark.read.parquet(TABLE_PATH)).count()
    lag_final = show_lag()

# COMMAND ----------

# MAGIC %md ## Clean up (local run only)

# COMMAND ----------

if local is not None:
    local.close()
