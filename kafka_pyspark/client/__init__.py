"""Sockets to Kafka 0.7 brokers: connections, the fetch loop, producing, OFFSETS lookups.

Importing this package does not import pyarrow; the fetch loop imports the message codec
(``kafka_pyspark._messages``) when it first decodes.
"""

from kafka_pyspark.client._connection import BrokerConnection
from kafka_pyspark.client._fetch_types import FetchSettings, OffsetRange
from kafka_pyspark.client._fetcher import (
    iter_multi_range,
    iter_range,
    probe_partition_count,
)
from kafka_pyspark.client._framing import BROKER_MAX_REQUEST_BYTES
from kafka_pyspark.client._offsets import (
    SegmentStarts,
    before_time,
    earliest,
    latest,
    segment_starts,
)
from kafka_pyspark.client._producer import DEFAULT_MAX_REQUEST_SIZE, DeliveryCount, Producer

__all__ = [
    "BROKER_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_REQUEST_SIZE",
    "BrokerConnection",
    "DeliveryCount",
    "FetchSettings",
    "OffsetRange",
    "Producer",
    "SegmentStarts",
    "before_time",
    "earliest",
    "iter_multi_range",
    "iter_range",
    "latest",
    "probe_partition_count",
    "segment_starts",
]
