"""Every option of the data source, parsed and validated once, into frozen dataclasses. Pure:
no Spark (``kafka07 produce`` parses the write options where pyspark is not installed).

By subject:

- :mod:`kafka_pyspark._cluster.options` (one layer down, because ``Cluster`` and ``Registry``
  take it): where the cluster is (``zk.connect``/``broker.list``, timeouts, credentials
  ``zk.auth.user`` + ``zk.auth.password``) -> :class:`ClusterOptions`; the value parsers all
  options share are :mod:`kafka_pyspark._shared.option_values`;
- :mod:`.option_names`: which option belongs to which mode, and its documented spelling;
- :mod:`.habits`: what an unknown name is told (Spark's Kafka source options, near misses);
- :mod:`.subscription`: ``subscribe``/``subscribePattern``/``assign``;
- :mod:`.read_options`: the read options (batch and stream) -> :class:`ReadOptions`;
- :mod:`.write_options`: the write options -> :class:`WriteOptions`, with
  :mod:`.delivery_options` (``delivery.*``); :mod:`.write_columns`: the writer's input columns
  (a Spark schema's: :mod:`kafka_pyspark._spark.write.driver`).

Segment-file reads (``path``) have their own options:
:mod:`kafka_pyspark._options.segment_path`.
"""

from kafka_pyspark._cluster import ClusterOptions, parse_cluster_options
from kafka_pyspark._options.option_names import (
    BATCH_ONLY_OPTIONS,
    CLUSTER_OPTIONS,
    READ_OPTIONS,
    SPARK_SINK_OPTIONS,
    STREAM_ONLY_OPTIONS,
    WRITE_OPTIONS,
    canonical_name,
)
from kafka_pyspark._options.read_options import (
    Mode,
    OffsetSpec,
    ReadOptions,
    parse_offsets_json,
    parse_read_options,
    validate_read_options,
)
from kafka_pyspark._options.subscription import (
    Assign,
    Subscribe,
    SubscribePattern,
    Subscription,
    java_regex_to_python,
)
from kafka_pyspark._options.write_options import (
    WriteOptions,
    parse_codec,
    parse_write_options,
    parse_write_options_only,
)

__all__ = [
    "BATCH_ONLY_OPTIONS",
    "CLUSTER_OPTIONS",
    "READ_OPTIONS",
    "SPARK_SINK_OPTIONS",
    "STREAM_ONLY_OPTIONS",
    "WRITE_OPTIONS",
    "Assign",
    "ClusterOptions",
    "Mode",
    "OffsetSpec",
    "ReadOptions",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "WriteOptions",
    "canonical_name",
    "java_regex_to_python",
    "parse_cluster_options",
    "parse_codec",
    "parse_offsets_json",
    "parse_read_options",
    "parse_write_options",
    "parse_write_options_only",
    "validate_read_options",
]
