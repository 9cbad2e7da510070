"""kafka_pyspark: Apache Spark data source "kafka07" for Apache Kafka 0.7 clusters.

Public API::

    register(spark)                      # registers the short name "kafka07" (idempotent)
    Kafka07DataSource                    # the pyspark DataSource class
    decode_message_set(data, base_offset=0, *, verify_crc=True) -> DecodeResult
    encode_message_set(values, *, compression="none", magic=1) -> bytes

    # looking at a cluster from a notebook or script (kafka_pyspark._admin; no Spark needed)
    topic_partitions(zk_connect, topic, *, options=None) -> [(broker, partition), ...]
    partition_for_key(key, partitions) -> (broker, partition)   # where the writer puts a key
    group_lag(zk_connect, group, topics=None, *, options=None) -> [{...}]  # `kafka07 lag` rows
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def __getattr__(name: str) -> Any:
    # Lazy: importing kafka_pyspark (e.g. for the codec alone) must not import pyspark.
    if name in ("decode_message_set", "encode_message_set", "DecodeResult"):
        from kafka_pyspark import _messages as messages

        return getattr(messages, name)
    if name in ("topic_partitions", "partition_for_key", "group_lag"):
        from kafka_pyspark import _admin as admin

        return getattr(admin, name)
    if name == "Kafka07DataSource":
        from kafka_pyspark._spark.source import Kafka07DataSource

        return Kafka07DataSource
    raise AttributeError(f"module 'kafka_pyspark' has no attribute {name!r}")


def register(spark: SparkSession) -> None:
    """Register the ``kafka07`` data source with ``spark`` (safe to call more than once).

    It registers the source in the session once, even where Spark already found it by itself
    (from the installed ``pyspark_kafka07`` module; Spark then logs once that it "replaced a
    statically registered data source", and Spark 4.0, which refuses to, keeps its own): Spark
    starts Python workers per environment, and a
    statically found source's tasks get one of their own, so a session's first ``kafka07``
    read would start a fresh Python worker (a second or more) instead of reusing the one the
    session's earlier Python work (UDFs, other data sources) already started. Later calls for
    the same session do nothing (no WARN that it replaced the source).

    It also sets ``spark.sql.redaction.string.regex`` for the session, if it is unset, to
    :data:`kafka_pyspark._cluster.zk_auth.PASSWORD_STATEMENT_REGEX`: Spark redacts
    ``zk.auth.password`` in the option maps it shows, but Spark Connect also shows each plan as
    text (the UI's Connect tab, the event log), and SQL statements are shown as typed; that
    conf is what Spark redacts those texts with (docs/reading.md, "ZooKeeper ACLs").
    """
    from kafka_pyspark._spark.source import Kafka07DataSource

    key = _session_key(spark)
    if key is None or key not in _REGISTERED_IN:
        try:
            spark.dataSource.register(Kafka07DataSource)
        except Exception as e:  # Spark 4.0 refuses to replace a source it found installed
            if "DATA_SOURCE_ALREADY_EXISTS" not in str(e):
                raise
        if key is not None:
            _REGISTERED_IN.add(key)
    _redact_password_in_statements(spark)


_REGISTERED_IN: set[int] = set()
"""The classic sessions (:func:`_session_key`) :func:`register` registered ``kafka07`` in."""


def _session_key(spark: SparkSession) -> int | None:
    """A classic session's JVM identity (Spark Connect: None, registered at every call)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return None
    try:
        return int(spark._jvm.System.identityHashCode(jsession))  # type: ignore[union-attr]
    except Exception:  # py4j: a different JVM API; registering again is always correct
        return None


def _redact_password_in_statements(spark: SparkSession) -> None:
    from kafka_pyspark._cluster.zk_auth import PASSWORD_STATEMENT_REGEX, STATEMENT_REDACTION_CONF

    try:
        if not spark.conf.get(STATEMENT_REDACTION_CONF, None):  # the user's own is kept
            spark.conf.set(STATEMENT_REDACTION_CONF, PASSWORD_STATEMENT_REGEX)
    except Exception as e:  # a platform that allows setting only some confs: say so, go on
        logging.getLogger(__name__).warning(
            "kafka07: could not set %s (%s); where a zk.auth.password is given through Spark "
            "Connect or in SQL text, set it as docs/reading.md (ZooKeeper ACLs) says",
            STATEMENT_REDACTION_CONF, e,
        )


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
