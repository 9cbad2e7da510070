# Databricks notebook source
# MAGIC %md
# MAGIC # Writing a DataFrame to Kafka 0.7, then reading it back
# MAGIC
# MAGIC `df.write.format("kafka07")` with compression (`gzip` or `snappy`, in the framing 0.7's
# MAGIC Java clients read) and key partitioning (a `key` column picks the broker-partition exactly
# MAGIC as 0.7's Java `DefaultPartitioner` does for a `String` key), then
# MAGIC `spark.read.format("kafka07")` to check that every row arrived where it should.
# MAGIC
# MAGIC **This notebook writes test messages into the topic of the `topic` widget**, and only
# MAGIC when the widget `write_test_messages` is `yes` (default `no`: then it reads and shows
# MAGIC what an earlier run wrote). Use a topic meant for tests.
# MAGIC
# MAGIC **On Databricks**: the first cell installs the package from what the widget `install`
# MAGIC names (a wheel in a Volume, a git URL; `auto`: nothing when it is a cluster library, else
# MAGIC the wheel `make dist` left in this Git folder's `dist/`), then set the widgets.
# MAGIC **Anywhere else** (`python notebooks/03_write_and_read_back.py` with the package
# MAGIC installed, Jupyter, VS Code): the first cell installs nothing and the setup cell starts a
# MAGIC local ZooKeeper, two
# MAGIC embedded brokers and Spark, with stand-ins for `dbutils.widgets` and `display()`.

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

    nb = LocalNotebook("03_write_and_read_back").start()
    spark, dbutils, display = nb.spark, nb.dbutils, nb.display

from kafka_pyspark import register

register(spark)  # Spark Connect (shared, serverless) does not find "kafka07" by itself

# COMMAND ----------

dbutils.widgets.text("zk_connect", "zk1:2181/kafka", "ZooKeeper (zk.connect, with the chroot)")
dbutils.widgets.text("topic", "kafka07_notebook_test", "Topic (test messages go here)")
dbutils.widgets.dropdown("write_test_messages", "no", ["no", "yes"], "Write test messages")
dbutils.widgets.text("test_messages", "2000", "How many test messages")
dbutils.widgets.text("keys", "50", "How many distinct keys")
dbutils.widgets.dropdown("compression_codec", "snappy", ["none", "gzip", "snappy"],
                         "compression.codec")
dbutils.widgets.text("batch_size", "100", "batch.size (messages per compressed set)")

ZK = dbutils.widgets.get("zk_connect")
TOPIC = dbutils.widgets.get("topic")
WRITE_TEST_MESSAGES = dbutils.widgets.get("write_test_messages") == "yes"
TEST_MESSAGES = int(dbutils.widgets.get("test_messages"))
KEYS = int(dbutils.widgets.get("keys"))
CODEC = dbutils.widgets.get("compression_codec")
BATCH_SIZE = int(dbutils.widgets.get("batch_size"))
print(f"zk.connect={ZK} topic={TOPIC} write_test_messages={WRITE_TEST_MESSAGES}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## A new topic
# MAGIC
# MAGIC 0.7 has no "create topic": a broker registers a topic (with all its partitions) on its
# MAGIC first message, and producers send a topic they do not know to partition 0 of every live
# MAGIC broker; so does this writer. For a new topic, a few `hello` messages go first; once the
# MAGIC brokers have registered it, keys spread over all partitions (on a real cluster that takes
# MAGIC a moment: rerun this cell if the list below is short).

# COMMAND ----------

from pyspark.sql import functions as F

from kafka_pyspark import topic_partitions

partitions = topic_partitions(ZK, TOPIC)
if WRITE_TEST_MESSAGES and not partitions:
    (spark.range(10).select(F.col("id").cast("string").alias("key"),
                            F.to_json(F.struct(F.col("id").alias("hello"))).alias("value"))
     .write.format("kafka07").option("zk.connect", ZK).option("topic", TOPIC)
     .mode("append").save())
    if nb is not None:  # the local brokers register the new topic in ZooKeeper: wait for it
        nb.wait_for_topic(TOPIC)
    partitions = topic_partitions(ZK, TOPIC)
print(f"{TOPIC}: broker-partitions {partitions}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Write keyed rows, compressed, `batch_size` messages per compressed set
# MAGIC
# MAGIC Each value carries this run's id, so the read below finds exactly the rows written here.

# COMMAND ----------

import uuid

RUN = uuid.uuid4().hex
if WRITE_TEST_MESSAGES:
    profiles = spark.range(TEST_MESSAGES).select(
        F.concat(F.lit("customer-"), (F.col("id") % KEYS).cast("string")).alias("key"),
        F.to_json(F.struct(F.lit(RUN).alias("run"), F.col("id"),
                           (F.col("id") % KEYS).alias("customer"))).alias("value"),
    )
    (profiles.write.format("kafka07")
     .option("zk.connect", ZK)
     .option("topic", TOPIC)
     .option("compression.codec", CODEC)
     .option("batch.size", BATCH_SIZE)
     .mode("append")  # Spark's rule for Python data sources; Kafka only appends anyway
     .save())
else:
    print("write_test_messages is 'no': nothing written; reading what earlier runs wrote")

# COMMAND ----------

# MAGIC %md ## Read it back

# COMMAND ----------

value = F.col("value").cast("string")
back = (spark.read.format("kafka07").option("zk.connect", ZK).option("subscribe", TOPIC)
        .load()
        .select("broker", "partition", "offset", "inner_index", "compression",
                F.get_json_object(value, "$.run").alias("run"),
                F.get_json_object(value, "$.customer").cast("int").alias("customer"),
                F.get_json_object(value, "$.id").cast("long").alias("id"))
        .where("customer IS NOT NULL"))  # test rows, not the `hello` ones
if WRITE_TEST_MESSAGES:
    back = back.where(F.col("run") == RUN)  # this run's rows only
display(back.groupBy("broker", "partition", "compression").count()
        .orderBy("broker", "partition"))
rows_back = back.count()

# COMMAND ----------

# MAGIC %md
# MAGIC Every key is in exactly one broker-partition: the one Java's `String.hashCode` picks over
# MAGIC the sorted list of broker-partitions (`kafka_pyspark.partition_for_key`).

# COMMAND ----------

from kafka_pyspark import partition_for_key

places = back.select("customer", "broker", "partition").distinct().collect()
placed = {r.customer: (r.broker, r.partition) for r in places}
keys_where_expected = sum(
    place == partition_for_key(f"customer-{customer}", partitions)
    for customer, place in placed.items())
print(f"{len(placed)} keys in {len(places)} (key, broker-partition) pairs; "
      f"{keys_where_expected} of {len(placed)} where 0.7's DefaultPartitioner puts them")
ids_back = sorted(r.id for r in back.select("id").collect())

# COMMAND ----------

# MAGIC %md ## Clean up (local run only)

# COMMAND ----------

if nb is not None:
    nb.close()
