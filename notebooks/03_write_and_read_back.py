# Databricks notebook source
# MAGIC %md
# MAGIC # Writing a DataFrame to Kafka 0.7, then reading it back
# MAGIC
# MAGIC `df.write.format("kafka07")` with compression (`gzip` or `snappy`, in the framing 0.7's
# MAGIC Java clients read) and key partitioning (a `key` column picks the broker-partition exactly
# MAGIC as 0.7's Java `DefaultPartitioner` does for a `String` key), then
# MAGIC `spark.read.format("kafka07")` to check that every row arrived where it should.
# MAGIC
# MAGIC **On Databricks**: `kafka_pyspark` as a cluster library, set the widgets. **Elsewhere**
# MAGIC the next cell starts a local ZooKeeper, two embedded brokers and Spark.

# COMMAND ----------

import os

ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ
if ON_DATABRICKS:
    dbutils.widgets.text("zk_connect", "zk1:2181/kafka")  # noqa: F821 (Databricks globals)
    dbutils.widgets.text("topic", "profiles")  # noqa: F821
    ZK = dbutils.widgets.get("zk_connect")  # noqa: F821
    TOPIC = dbutils.widgets.get("topic")  # noqa: F821
    local = None
else:
    from kafka_pyspark.testing.local import LocalCluster

    local = LocalCluster(partitions=(2, 3)).start()
    spark = local.spark
    ZK, TOPIC = local.zk_connect, "profiles"
print(f"zk.connect={ZK} topic={TOPIC}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## A new topic
# MAGIC
# MAGIC 0.7 has no "create topic": a broker registers a topic (with all its partitions) on its
# MAGIC first message, and producers send a topic they do not know to partition 0 of every live
# MAGIC broker. So the first write of a new topic goes there; after it, keys spread over all
# MAGIC partitions. Skip this cell for a topic that exists.

# COMMAND ----------

from pyspark.sql import functions as F

from kafka_pyspark.cluster import Cluster
from kafka_pyspark.cluster_options import cluster_options

with Cluster(cluster_options(zk_connect=ZK)) as cluster:
    broker_ids = sorted(cluster.brokers())
# one message to partition 0 of each broker (explicit `broker`/`partition` columns)
(spark.createDataFrame([(b, 0, "hello") for b in broker_ids],
                       "broker int, partition int, value string")
 .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC).mode("append").save())
if local is not None:
    for b in local.brokers:
        b.wait_for_topic(TOPIC)

# COMMAND ----------

# MAGIC %md ## Write 2,000 keyed rows, snappy-compressed, 100 messages per compressed set

# COMMAND ----------

profiles = spark.range(2000).select(
    F.concat(F.lit("customer-"), (F.col("id") % 50).cast("string")).alias("key"),
    F.to_json(F.struct(F.col("id"), (F.col("id") % 50).alias("customer"))).alias("value"),
)
(profiles.write.format("kafka07")
 .option("zk.connect", ZK)
 .option("topic", TOPIC)
 .option("compression.codec", "snappy")
 .option("batch.size", 100)
 .mode("append")  # Spark's rule for Python data sources; Kafka only appends anyway
 .save())

# COMMAND ----------

# MAGIC %md ## Read it back

# COMMAND ----------

back = (spark.read.format("kafka07").option("zk.connect", ZK).option("subscribe", TOPIC)
        .load()
        .where("compression = 'snappy'")  # the 2,000 rows (the first write was uncompressed)
        .select("broker", "partition", "offset", "inner_index",
                F.get_json_object(F.col("value").cast("string"), "$.customer")
                .cast("int").alias("customer"),
                F.get_json_object(F.col("value").cast("string"), "$.id").cast("long").alias("id")))
back.groupBy("broker", "partition").count().orderBy("broker", "partition").show()
rows_back = back.count()

# COMMAND ----------

# MAGIC %md
# MAGIC Every key is in exactly one broker-partition: the one Java's `String.hashCode` picks over
# MAGIC the sorted list of broker-partitions (`kafka_pyspark.partitioner`).

# COMMAND ----------

from kafka_pyspark.partitioner import java_partition, java_string_hashcode

with Cluster(cluster_options(zk_connect=ZK)) as cluster:
    partitions = cluster.partitions(TOPIC)
places = back.select("customer", "broker", "partition").distinct().collect()
placed = {r.customer: (r.broker, r.partition) for r in places}
expected = {c: partitions[java_partition(java_string_hashcode(f"customer-{c}"), len(partitions))]
            for c in range(50)}
keys_where_expected = sum(placed[c] == expected[c] for c in range(50))
print(f"{len(placed)} keys in {len(places)} (key, broker-partition) pairs; "
      f"{keys_where_expected} of 50 where 0.7's DefaultPartitioner puts them")
ids_back = sorted(r.id for r in back.select("id").collect())

# COMMAND ----------

# MAGIC %md ## Clean up (local run only)

# COMMAND ----------

if local is not None:
    local.close()
