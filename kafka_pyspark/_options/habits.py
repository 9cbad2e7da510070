"""What an unknown option name gets told: a pointer for the options of Spark's own Kafka source
(``format("kafka")``, Kafka 0.10+) and a "did you mean" for near misses. Pure.

Spark lower-cases option names before a Python data source sees them, so the user's own
spelling is gone: a name from the table below is shown as Spark's Kafka documentation spells it,
a near miss in the spelling of the option it resembles where their letters agree
(``startingoffset`` -> ``startingOffset``, did you mean ``startingOffsets``?).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from kafka_pyspark._cluster.zk_auth import ZK_AUTH_OPTIONS
from kafka_pyspark.errors import OptionError

__all__ = ["SPARK_KAFKA_POINTERS", "unknown_option", "write_option_when_reading"]

_OFFSETS_ARE_BYTES = (
    "Kafka 0.7 offsets are byte positions, and how many messages a range holds is known only "
    "once it is fetched (a compressed wrapper holds many)"
)
_NO_TIMESTAMPS = "Kafka 0.7 messages carry no timestamp"
_NO_END_TIME = f"{_NO_TIMESTAMPS}, so a read cannot end at a time: use endingOffsets"
_FEWER_BATCHES = (
    f"{_OFFSETS_ARE_BYTES}; for fewer, larger micro-batches use a longer "
    "trigger(processingTime=...)"
)
_NO_RETRY_SETTING = (
    "kafka07 asks 0.7 brokers for offsets with OFFSETS requests bounded by socket.timeout.ms; "
    "there is no separate retry setting"
)
_FETCH_SIZE = "use fetch.size (bytes per FETCH request)"
_ZK_AUTH = "/".join(ZK_AUTH_OPTIONS)

#: options of Spark's Kafka 0.10+ source and sink (as its documentation spells them) -> what to
#: do with Kafka 0.7 instead
SPARK_KAFKA_POINTERS: dict[str, str] = {
    "kafka.bootstrap.servers": (
        "Kafka 0.7 has no bootstrap servers: give zk.connect (the ZooKeeper the brokers "
        "register in, 'host:2181[/chroot]') or broker.list ('brokerId:host:port,...')"
    ),
    "maxOffsetsPerTrigger": (
        "Kafka 0.7 offsets are byte positions, not message counts: use maxBytesPerTrigger "
        "(bytes per micro-batch, cut at message boundaries; every Spark 4 applies it with a "
        "processing-time trigger, while Spark 4.0/4.1 run Trigger.AvailableNow as one "
        "micro-batch: docs/streaming.md)"
    ),
    "minOffsetsPerTrigger": f"is not supported: {_FEWER_BATCHES}",
    "maxTriggerDelay": f"is not supported (it goes with minOffsetsPerTrigger): {_FEWER_BATCHES}",
    "maxRecordsPerPartition": (
        f"is not supported: {_OFFSETS_ARE_BYTES}; use minPartitions to split the read"
    ),
    "includeHeaders": "Kafka 0.7 messages have no headers",
    "startingOffsetsByTimestamp": (
        f"{_NO_TIMESTAMPS}: use startingTimestamp (one time for every broker-partition, "
        "resolved to a log segment) or startingOffsets with byte offsets"
    ),
    "startingOffsetsByTimestampStrategy": (
        f"{_NO_TIMESTAMPS}: use startingTimestamp (resolved to a log segment)"
    ),
    "endingTimestamp": _NO_END_TIME,
    "endingOffsetsByTimestamp": _NO_END_TIME,
    "kafka.group.id": (
        "use group.id: a 0.7 consumer group in ZooKeeper (startingOffsets=group starts from "
        "its offsets, commitToGroup writes them)"
    ),
    "groupIdPrefix": (
        "kafka07 reads use no consumer group unless group.id names one"
    ),
    "kafkaConsumer.pollTimeoutMs": "use socket.timeout.ms (bounds every broker request)",
    "fetchOffset.numRetries": _NO_RETRY_SETTING,
    "fetchOffset.retryIntervalMs": _NO_RETRY_SETTING,
    "kafka.compression.type": "use compression.codec (none, gzip or snappy)",
    "kafka.fetch.max.bytes": _FETCH_SIZE,
    "kafka.max.partition.fetch.bytes": _FETCH_SIZE,
    "kafka.batch.size": "use batch.size (messages per message set, not bytes)",
    "kafka.max.request.size": (
        "use max.message.size (the largest message payload a 0.7 broker takes)"
    ),
    "kafka.security.protocol": (
        f"Kafka 0.7 brokers speak plaintext only (no TLS, no SASL); ZooKeeper credentials "
        f"are {_ZK_AUTH}"
    ),
    "checkpointLocation": "is set on the sink: df.writeStream.option('checkpointLocation', ...)",
    "queryName": "is set on the sink: df.writeStream.queryName(...)",
}
_POINTERS = {name.lower(): name for name in SPARK_KAFKA_POINTERS}
_KAFKA_PREFIX = "kafka."
_PREFIX_POINTER = (
    "options prefixed 'kafka.' configure the client of Spark's Kafka 0.10+ source; kafka07 "
    "speaks the 0.7 protocol itself and takes only its own options"
)
_TLS_PREFIXES = ("kafka.ssl.", "kafka.sasl.")


def unknown_option(key: str, purpose: str, known: Iterable[str]) -> OptionError:
    """The error for option ``key`` (lower-cased, as Spark passes it), which is none of
    ``known`` (documented spellings) ``purpose`` takes, e.g. "reading"."""
    if key in _POINTERS:
        name = _POINTERS[key]
        return OptionError(name, SPARK_KAFKA_POINTERS[name])
    if key.startswith(_TLS_PREFIXES):
        return OptionError(key, SPARK_KAFKA_POINTERS["kafka.security.protocol"])
    names = sorted(known)
    close = difflib.get_close_matches(key, [n.lower() for n in names], n=1, cutoff=0.75)
    suggestion = next((n for n in names if close and n.lower() == close[0]), None)
    listing = ", ".join(names)
    if key.startswith(_KAFKA_PREFIX):
        return OptionError(key, f"{_PREFIX_POINTER}; known options: {listing}")
    if suggestion is None:
        return OptionError(key, f"unknown option for {purpose}; known options: {listing}")
    return OptionError(
        spelt_like(key, suggestion),
        f"unknown option for {purpose}; did you mean '{suggestion}'? Known options: {listing}",
    )


def write_option_when_reading(key: str) -> OptionError:
    """The error for write option ``key`` given to a read (a cluster's or segment files')."""
    hint = " (to read a topic, use subscribe)" if key == "topic" else ""
    return OptionError(key, f"is a write option; it has no meaning when reading{hint}")


def spelt_like(key: str, model: str) -> str:
    """``key`` with the letter case of ``model`` wherever the two agree letter for letter."""
    out = list(key)
    matcher = difflib.SequenceMatcher(None, key, model.lower(), autojunk=False)
    for block in matcher.get_matching_blocks():
        out[block.a:block.a + block.size] = model[block.b:block.b + block.size]
    return "".join(out)
