"""kafka_pyspark: Apache Spark data source "kafka07" for Apache Kafka 0.7 clusters.

Public API::

    register(spark)                      # registers the short name "kafka07" (idempotent)
    Kafka07DataSource                    # the pyspark DataSource class
    decode_message_set(data, base_offset=0, *, verify_crc=True) -> DecodeResult
    encode_message_set(values, *, compression="none", magic=1) -> bytes

    # looking at a cluster from a notebook or script (kafka_pyspark.admin; no Spark needed)
    topic_partitions(zk_connect, topic, *, options=None) -> [(broker, partition), ...]
    partition_for_key(key, partitions) -> (broker, partition)   # where the writer puts a key
    group_lag(zk_connect, group, topics=None, *, options=None) -> [{...}]  # `kafka07 lag` rows
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def __getattr__(name: str) -> Any:
    # Lazy: importing kafka_pyspark (e.g. for the codec alone) must not import pyspark.
    if name in ("decode_message_set", "encode_message_set", "DecodeResult"):
        from kafka_pyspark import messages

        return getattr(messages, name)
    if name in ("topic_partitions", "partition_for_key", "group_lag"):
        from kafka_pyspark import admin

        return getattr(admin, name)
    if name == "Kafka07DataSource":
        from kafka_pyspark.spark.source import Kafka07DataSource

        return Kafka07DataSource
    raise AttributeError(f"module 'kafka_pyspark' has no attribute {name!r}")


def register(spark: SparkSession) -> None:
    """Register the ``kafka07`` data source with ``spark`` (safe to call more than once).

    When Spark already knows ``kafka07`` (registered by itself from the installed
    ``pyspark_kafka07`` module, or by an earlier call) nothing is done: registering again would
    only make Spark log a WARN that it replaced the source.
    """
    from kafka_pyspark.spark.source import Kafka07DataSource

    if not _registered(spark, Kafka07DataSource.name()):
        spark.dataSource.register(Kafka07DataSource)


def _registered(spark: SparkSession, name: str) -> bool:
    """Whether a classic session's DataSourceManager has ``name`` (Spark Connect: unknown)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return False
    try:
        return bool(jsession.sessionState().dataSourceManager().dataSourceExists(name))
    except Exception:  # py4j: an older or different JVM API; registering is always correct
        return False


__all__ = [
    "DecodeResult",
    "Kafka07DataSource",
    "__version__",
    "decode_message_set",
    "encode_message_set",
    "group_lag",
    "partition_for_key",
    "register",
    "topic_partitions",
]
