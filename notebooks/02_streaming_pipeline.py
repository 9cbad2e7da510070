# Databricks notebook source
# MAGIC %md
# MAGIC # Streaming: a Kafka 0.7 topic -> transform -> table, with the group's lag
# MAGIC
# MAGIC `spark.readStream.format("kafka07")` with a checkpoint in a Unity Catalog Volume
# MAGIC (exactly-once into the table), `maxBytesPerTrigger` (bounded micro-batches) and
# MAGIC `commitToGroup` (the consumed offsets are written to 0.7's ZooKeeper group offsets, so
# MAGIC 0.7's tools, `kafka07 lag` and `kafka_pyspark.group_lag` see the pipeline's progress).
# MAGIC
# MAGIC **On Databricks**: the first cell installs the package from what the widget `install`
# MAGIC names (a wheel in a Volume, a git URL; `auto`: nothing when it is a cluster library, else
# MAGIC the wheel `make dist` left in this Git folder's `dist/`), then set the widgets (the Volume
# MAGIC must exist: `CREATE VOLUME catalog.schema.volume`). Nothing is written to the topic unless
# MAGIC the widget `write_test_messages` is `yes`. **Anywhere else** (`python
# MAGIC notebooks/02_streaming_pipeline.py` with the package installed, Jupyter, VS Code): the
# MAGIC first cell installs nothing and the setup cell starts a local ZooKeeper, two embedded
# MAGIC brokers and
# MAGIC Spark, with stand-ins for `dbutils.widgets`, `display()`, the schema and `/Volumes`.

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
    nb, VOLUMES = None, "/Volumes"  # spark, dbutils and display are the notebook's own
else:
    from kafka_pyspark.testing.notebook import LocalNotebook

    # the local topic holds a few KB: a small maxBytesPerTrigger shows several micro-batches
    nb = LocalNotebook("02_streaming_pipeline", widgets={"max_bytes_per_trigger": "4096"}).start()
    spark, dbutils, display, VOLUMES = nb.spark, nb.dbutils, nb.display, nb.volumes

from kafka_pyspark import register

register(spark)  # Spark Connect (shared, serverless) does not find "kafka07" by itself

# COMMAND ----------

dbutils.widgets.text("zk_connect", "zk1:2181/kafka", "ZooKeeper (zk.connect, with the chroot)")
dbutils.widgets.text("topic", "orders", "Topic")
dbutils.widgets.text("group_id", "orders-to-table", "0.7 consumer group (commitToGroup)")
dbutils.widgets.text("max_bytes_per_trigger", str(16 << 20), "maxBytesPerTrigger (bytes)")
dbutils.widgets.text("catalog", "main", "Catalog")
dbutils.widgets.text("schema", "default", "Schema")
dbutils.widgets.text("table", "kafka07_orders", "Table")
dbutils.widgets.text("volume", "checkpoints", "Volume for the checkpoint")
dbutils.widgets.dropdown("write_test_messages", "no", ["no", "yes"], "Write test messages first")
dbutils.widgets.text("test_messages", "1000", "How many test messages")

ZK = dbutils.widgets.get("zk_connect")
TOPIC = dbutils.widgets.get("topic")
GROUP = dbutils.widgets.get("group_id")
MAX_BYTES_PER_TRIGGER = int(dbutils.widgets.get("max_bytes_per_trigger"))
CATALOG = dbutils.widgets.get("catalog")
SCHEMA = dbutils.widgets.get("schema")
TABLE = f"{CATALOG}.{SCHEMA}.{dbutils.widgets.get('table')}"  # Unity Catalog: three levels
CHECKPOINT = f"{VOLUMES}/{CATALOG}/{SCHEMA}/{dbutils.widgets.get('volume')}/kafka07/{GROUP}"
WRITE_TEST_MESSAGES = dbutils.widgets.get("write_test_messages") == "yes"
TEST_MESSAGES = int(dbutils.widgets.get("test_messages"))
print(f"zk.connect={ZK} topic={TOPIC} group={GROUP} table={TABLE} checkpoint={CHECKPOINT}")

# COMMAND ----------

# MAGIC %md
# MAGIC Test orders (`user,amount` lines), only with `write_test_messages` = `yes` (the local run
# MAGIC sets it: its topic starts empty).

# COMMAND ----------


def write_test_orders(first: int, n: int) -> None:
    (spark.range(first, first + n)
     .selectExpr("CONCAT('user-', CAST(id % 7 AS STRING)) AS key",
                 "CONCAT('user-', CAST(id % 7 AS STRING), ',', CAST(id % 100 AS STRING)) AS value")
     .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC)
     .option("compression.codec", "gzip").mode("append").save())


if WRITE_TEST_MESSAGES:
    write_test_orders(0, 5)  # a new topic: partition 0 of each broker, then all partitions exist
    if nb is not None:  # the local brokers register the new topic in ZooKeeper: wait for it
        nb.wait_for_topic(TOPIC)
    write_test_orders(5, TEST_MESSAGES - 5)

# COMMAND ----------

# MAGIC %md ## The group's lag before the pipeline ran (a new group has committed nothing)

# COMMAND ----------

import pandas as pd

from kafka_pyspark import group_lag


def show_lag() -> list:
    """`kafka07 lag --zk ZK --group GROUP --topic TOPIC`, as rows."""
    rows = group_lag(ZK, GROUP, [TOPIC])
    display(pd.DataFrame(rows, columns=["broker", "partition", "offset", "latest", "lag",
                                        "status"]))
    return rows


lag_before = show_lag()

# COMMAND ----------

# MAGIC %md
# MAGIC ## The pipeline
# MAGIC
# MAGIC The pipeline reads what is there now in micro-batches of at most `maxBytesPerTrigger`
# MAGIC bytes and stops: on Spark 4.2 and later (Databricks Runtime 19) with
# MAGIC `trigger(availableNow=True)`; Spark 4.0 and 4.1 (Databricks Runtime 17 and 18) run
# MAGIC availableNow as a single micro-batch, so there a processing-time trigger runs until it
# MAGIC has caught up (`processAllAvailable()`), then stops. Use `trigger(processingTime="1
# MAGIC minute")` without the stop for a pipeline that keeps running. Rerunning the cell
# MAGIC continues from the checkpoint.

# COMMAND ----------

from pyspark.sql import functions as F

stream = (spark.readStream.format("kafka07")
          .option("zk.connect", ZK)
          .option("subscribe", TOPIC)
          .option("startingOffsets", "earliest")  # first run only; then the checkpoint
          .option("maxBytesPerTrigger", MAX_BYTES_PER_TRIGGER)
          .option("group.id", GROUP)
          .option("commitToGroup", "true")
          .load())
orders = (stream
          .select("broker", "partition", "offset", "inner_index",
                  F.split(F.col("value").cast("string"), ",").alias("f"))
          .select("broker", "partition", "offset", "inner_index",
                  F.col("f")[0].alias("user"), F.col("f")[1].cast("int").alias("amount")))


AVAILABLE_NOW_IN_BATCHES = tuple(int(v) for v in spark.version.split(".")[:2]) >= (4, 2)


def run_pipeline() -> int:
    writer = orders.writeStream.option("checkpointLocation", CHECKPOINT)
    if AVAILABLE_NOW_IN_BATCHES:
        query = writer.trigger(availableNow=True).toTable(TABLE)  # managed: Delta on Databricks
        query.awaitTermination()
    else:
        query = writer.trigger(processingTime="1 second").toTable(TABLE)
        query.processAllAvailable()
        query.stop()
    batches = sum(1 for p in query.recentProgress if p.numInputRows > 0)
    print(f"{batches} micro-batches")
    return batches


batches = run_pipeline()

# COMMAND ----------

table = spark.table(TABLE)
display(table.groupBy("user").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount"))
        .orderBy("user"))
rows_in_table = table.count()

# COMMAND ----------

# MAGIC %md ## The group's lag now: the pipeline committed its offsets to ZooKeeper

# COMMAND ----------

lag_after = show_lag()

# COMMAND ----------

# MAGIC %md With test messages: more orders arrive, the lag grows; the next run catches up.

# COMMAND ----------

if WRITE_TEST_MESSAGES:
    write_test_orders(TEST_MESSAGES, TEST_MESSAGES // 5)
    lag_grown = show_lag()
    run_pipeline()
    rows_in_table = spark.table(TABLE).count()
    lag_final = show_lag()

# COMMAND ----------

# MAGIC %md ## Clean up (local run only)

# COMMAND ----------

if nb is not None:
    nb.close()
