# Databricks notebook source
# MAGIC %md
# MAGIC # Batch ingest: a Kafka 0.7 topic into a table
# MAGIC
# MAGIC Reads every message of a topic with `spark.read.format("kafka07")`, keeps where each came
# MAGIC from (`broker`, `partition`, `offset`), and appends it to a **Delta** table (parquet where
# MAGIC Delta is not available). Then: messages per broker-partition, and a plot of message
# MAGIC volume by broker-partition and offset range.
# MAGIC
# MAGIC **On Databricks**: install `kafka_pyspark` as a cluster library (docs/running.md) and set
# MAGIC the widgets. **Anywhere else** (Jupyter, VS Code, `python notebooks/01_batch_ingest.py`):
# MAGIC the next cell starts a local ZooKeeper, two embedded 0.7 brokers and a local Spark, and
# MAGIC the last cell removes them again.

# COMMAND ----------

import os

ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ
if ON_DATABRICKS:
    dbutils.widgets.text("zk_connect", "zk1:2181/kafka")  # noqa: F821 (Databricks globals)
    dbutils.widgets.text("topic", "events")  # noqa: F821
    ZK = dbutils.widgets.get("zk_connect")  # noqa: F821
    TOPIC = dbutils.widgets.get("topic")  # noqa: F821
    local = None
else:
    from kafka_pyspark.testing.local import LocalCluster

    local = LocalCluster(partitions=(2, 3)).start()  # ZooKeeper + brokers 0 and 1 + Spark
    spark = local.spark
    ZK, TOPIC = local.zk_connect, "events"
print(f"zk.connect={ZK} topic={TOPIC}")

# COMMAND ----------

# MAGIC %md
# MAGIC Locally there is no data yet: write some sample events (skipped on Databricks). The
# MAGIC first write finds the topic new and uses partition 0 of every broker, as 0.7 producers
# MAGIC do; after it the brokers register all their partitions and keys spread over them.

# COMMAND ----------

SAMPLE_ROWS = 3000
if local is not None:
    for first, n in ((0, 10), (10, SAMPLE_ROWS - 10)):
        (spark.range(first, first + n)
         .selectExpr("CAST(id % 17 AS STRING) AS key",
                     "CONCAT('{\"event\": ', CAST(id AS STRING), '}') AS value")
         .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC)
         .option("compression.codec", "snappy").mode("append").save())
        for b in local.brokers:  # each registers the topic in ZooKeeper after its first write
            b.wait_for_topic(TOPIC)

# COMMAND ----------

# MAGIC %md ## Read the topic (a snapshot: up to each broker-partition's log end now)

# COMMAND ----------

from pyspark.sql import functions as F

raw = (spark.read.format("kafka07")
       .option("zk.connect", ZK)
       .option("subscribe", TOPIC)
       .option("startingOffsets", "earliest")
       .load())
events = raw.select(
    "topic", "broker", "partition", "offset", "inner_index", "compression",
    F.col("value").cast("string").alias("value"),
    F.current_timestamp().alias("ingested_at"),
)

# COMMAND ----------

# MAGIC %md ## Append to a Delta table (parquet where Delta is not available)

# COMMAND ----------

TABLE = "kafka07_events"
TABLE_PATH = local.path(TABLE) if local is not None else None


def table_format() -> str:
    """delta on Databricks and where delta-spark is configured; else parquet."""
    if ON_DATABRICKS:
        return "delta"
    try:
        spark.range(0).write.format("delta").mode("overwrite").save(local.path("delta-probe"))
        return "delta"
    except Exception as e:  # Spark: [DATA_SOURCE_NOT_FOUND] Failed to find the data source
        print(f"Delta is not available here ({type(e).__name__}); writing parquet")
        return "parquet"


FORMAT = table_format()
writer = events.write.format(FORMAT).mode("append")
if TABLE_PATH is None:
    writer.saveAsTable(TABLE)
    table = spark.table(TABLE)
else:
    writer.save(TABLE_PATH)
    table = spark.read.format(FORMAT).load(TABLE_PATH)
ingested = table.count()
print(f"{ingested} messages in the {FORMAT} table {TABLE_PATH or TABLE}")

# COMMAND ----------

# MAGIC %md ## Messages per broker-partition

# COMMAND ----------

per_partition = (table.groupBy("broker", "partition")
                 .agg(F.count("*").alias("messages"),
                      F.min("offset").alias("first_offset"),
                      F.max("offset").alias("last_offset"))
                 .orderBy("broker", "partition"))
per_partition.show()
partition_counts = {(r.broker, r.partition): r.messages for r in per_partition.collect()}

# COMMAND ----------

# MAGIC %md
# MAGIC ## Message volume by broker-partition and offset range
# MAGIC
# MAGIC Offsets are byte positions, so equal offset ranges hold equal bytes. matplotlib is
# MAGIC preinstalled on Databricks; elsewhere `pip install 'kafka_pyspark[notebooks]'`.

# COMMAND ----------

BUCKETS = 8
span = table.agg(F.max("offset")).first()[0] or 0
bucket_bytes = max(1, span // BUCKETS + 1)
volume = (table.withColumn("bp", F.concat_ws("-", "broker", "partition"))
          .withColumn("range_start", F.floor(F.col("offset") / bucket_bytes) * bucket_bytes)
          .groupBy("bp", "range_start").count().orderBy("bp", "range_start").toPandas())

try:
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print("matplotlib is not installed: skipping the plot "
          "(pip install 'kafka_pyspark[notebooks]')")
if plt is not None:
    fig, ax = plt.subplots(figsize=(8, 4))
    for bp, part in volume.groupby("bp"):
        ax.plot(part["range_start"], part["count"], marker="o", label=f"broker-partition {bp}")
    ax.set_xlabel(f"offset range start (bytes; ranges of {bucket_bytes})")
    ax.set_ylabel("messages")
    ax.set_title(f"{TOPIC}: message volume by broker-partition and offset range")
    ax.legend()
    plt.show()
    plt.close(fig)

# COMMAND ----------

# MAGIC %md ## Clean up (local run only: Spark, brokers, ZooKeeper, the temporary directory)

# COMMAND ----------

if local is not None:
    local.close()
