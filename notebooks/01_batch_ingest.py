# Databricks notebook source
# MAGIC %md
# MAGIC # Batch ingest: a Kafka 0.7 topic into a table
# MAGIC
# MAGIC Reads every message of a topic with `spark.read.format("kafka07")`, keeps where each came
# MAGIC from (`broker`, `partition`, `offset`), and appends it to a table named
# MAGIC `catalog.schema.table` (Unity Catalog; a Delta table on Databricks). Then: messages per
# MAGIC broker-partition, and a plot of message volume by broker-partition and offset range.
# MAGIC
# MAGIC **On Databricks**: the first cell installs the package from what the widget `install`
# MAGIC names (a wheel in a Volume, a git URL; `auto`: nothing when it is a cluster library, else
# MAGIC the wheel `make dist` left in this Git folder's `dist/`), then set the widgets at the top.
# MAGIC Nothing is written to the topic unless the widget `write_test_messages` is `yes`.
# MAGIC **Anywhere else** (Jupyter, VS Code, `python notebooks/01_batch_ingest.py` with the
# MAGIC package installed, or after `make setup` with `.venv/bin/python`): the first cell installs
# MAGIC nothing, and the setup cell starts a local
# MAGIC ZooKeeper, two embedded 0.7 brokers and Spark, with stand-ins for `dbutils.widgets`,
# MAGIC `display()`, the catalog schema (`kafka_pyspark.testing.notebook`); the last cell removes
# MAGIC them again, and the plot is saved to `figures/01_batch_ingest-1.png`.

# COMMAND ----------

# What to install, from the widget `install` (Databricks) or $KAFKA07_INSTALL (elsewhere):
#   auto (default): nothing when kafka_pyspark is installed (a cluster library, your venv),
#     else the wheel `make dist` built in this repository's dist/ (a Databricks Git folder)
#   a wheel or sdist file: /Volumes/<catalog>/<schema>/<volume>/kafka_pyspark-0.1.0-py3-none-any.whl
#   a git URL of your own clone: git+file:///path/to/kafka_pyspark, or your git host's
#   skip: install nothing
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

try:
    # dbutils: a Databricks notebook's own global
    dbutils.widgets.text("install", "auto", "kafka_pyspark: auto, skip, a wheel, a git URL")
    INSTALL = dbutils.widgets.get("install")
except NameError:  # not on Databricks: no dbutils before the set-up cell
    INSTALL = os.environ.get("KAFKA07_INSTALL", "auto")
if INSTALL == "auto":
    here = [Path.cwd(), Path.cwd().parent]  # a notebook's working directory is its folder
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    patterns = (f"*-{tag}-{tag}-manylinux*.whl", "*-py3-none-any.whl")  # binary first
    wheels = [w for d in here for pattern in patterns
              for w in sorted((d / "dist").glob("kafka_pyspark-" + pattern))]
    if importlib.util.find_spec("kafka_pyspark") is not None:
        INSTALL = "skip"
    elif wheels:
        INSTALL = str(wheels[0])
    else:
        raise RuntimeError("kafka_pyspark is not installed and no dist/ wheel is here: run "
                           "`make dist`, or set the widget `install` to a wheel (README, Install)")
if INSTALL != "skip":
    print(f"installing {INSTALL}")
    if "DATABRICKS_RUNTIME_VERSION" in os.environ:  # notebook-scoped: driver and workers
        from IPython import get_ipython

        get_ipython().run_line_magic("pip", f"install --quiet {INSTALL}")
        dbutils.library.restartPython()  # noqa: F821
    else:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", INSTALL], check=True)

# COMMAND ----------

import os

if "DATABRICKS_RUNTIME_VERSION" in os.environ:
    nb = None  # spark, dbutils and display are the notebook's own
else:
    from kafka_pyspark.testing.notebook import LocalNotebook

    nb = LocalNotebook("01_batch_ingest").start()
    spark, dbutils, display = nb.spark, nb.dbutils, nb.display

from kafka_pyspark import register

register(spark)  # Spark Connect (shared, serverless) does not find "kafka07" by itself

# COMMAND ----------

dbutils.widgets.text("zk_connect", "zk1:2181/kafka", "ZooKeeper (zk.connect, with the chroot)")
dbutils.widgets.text("topic", "events", "Topic")
dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "default", "Schema")
dbutils.widgets.text("table", "kafka07_events", "Table")
dbutils.widgets.dropdown("write_test_messages", "no", ["no", "yes"], "Write test messages first")
dbutils.widgets.text("test_messages", "3000", "How many test messages")

ZK = dbutils.widgets.get("zk_connect")
TOPIC = dbutils.widgets.get("topic")
CATALOG = dbutils.widgets.get("catalog")
SCHEMA = dbutils.widgets.get("schema")
TABLE = f"{CATALOG}.{SCHEMA}.{dbutils.widgets.get('table')}"  # Unity Catalog: three levels
WRITE_TEST_MESSAGES = dbutils.widgets.get("write_test_messages") == "yes"
TEST_MESSAGES = int(dbutils.widgets.get("test_messages"))
print(f"zk.connect={ZK} topic={TOPIC} table={TABLE} write_test_messages={WRITE_TEST_MESSAGES}")

# COMMAND ----------

# MAGIC %md
# MAGIC Test messages (only with `write_test_messages` = `yes`; the local run sets it, since its
# MAGIC topic starts empty). The first write finds the topic new and uses partition 0 of every
# MAGIC broker, as 0.7 producers do; after it the brokers register all their partitions and keys
# MAGIC spread over them.

# COMMAND ----------


def write_test_messages(first: int, n: int) -> None:
    (spark.range(first, first + n)
     .selectExpr("CAST(id % 17 AS STRING) AS key",
                 "CONCAT('{\"event\": ', CAST(id AS STRING), '}') AS value")
     .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC)
     .option("compression.codec", "snappy").mode("append").save())


if WRITE_TEST_MESSAGES:
    write_test_messages(0, 10)
    if nb is not None:  # the local brokers register the new topic in ZooKeeper: wait for it
        nb.wait_for_topic(TOPIC)
    write_test_messages(10, TEST_MESSAGES - 10)

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

# MAGIC %md
# MAGIC ## Append to the table
# MAGIC
# MAGIC A managed table of the catalog's default format: Delta on Databricks (parquet in the
# MAGIC local stand-in).

# COMMAND ----------

events.write.mode("append").saveAsTable(TABLE)
table = spark.table(TABLE)
ingested = table.count()
print(f"{ingested} messages in {TABLE}")

# COMMAND ----------

# MAGIC %md ## Messages per broker-partition

# COMMAND ----------

per_partition = (table.groupBy("broker", "partition")
                 .agg(F.count("*").alias("messages"),
                      F.min("offset").alias("first_offset"),
                      F.max("offset").alias("last_offset"))
                 .orderBy("broker", "partition"))
display(per_partition)
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
    display(fig)
    plt.close(fig)

# COMMAND ----------

# MAGIC %md ## Clean up (local run only: Spark, brokers, ZooKeeper, the temporary directory)

# COMMAND ----------

if nb is not None:
    nb.close()
