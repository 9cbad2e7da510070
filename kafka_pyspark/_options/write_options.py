"""The write options (docs/writing.md "Options"; 0.7.2 producer defaults), parsed once on the
driver.

Pure (no sockets, no Spark session): the writers call :func:`parse_write_options` in their
``__init__``, which Spark runs on the driver at ``save()``/``start()``, so a bad option fails
before a byte is sent. The input columns are checked by :mod:`.write_columns`.

========================  =====================================================  ===========
``topic``                 target topic when rows have no ``topic`` column        (none)
``compression.codec``     ``none``/``gzip``/``snappy`` or 0/1/2 (0.7's integers)  ``none``
``compression.level``     gzip's deflate level, 0-9 (gzip only)                  (encoder's)
``batch.size``            most messages per message set                          200
``max.message.size``      largest message payload (or compressed wrapper         1000000
                          payload) a broker accepts; 0.7 compares the payload
``partitioner``           ``hash`` or ``random`` (also 0.7's class names         by columns
                          ``kafka.producer.DefaultPartitioner``)
========================  =====================================================  ===========

plus the delivery options (``delivery.*``, :mod:`.delivery_options`) and the cluster options
(``zk.connect``/``broker.list``/``zk.*``/``socket.*``,
:mod:`kafka_pyspark._cluster.options`). Spark passes option names lower-cased.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_pyspark._cluster import ClusterOptions, parse_cluster_options
from kafka_pyspark._cluster.zk_auth import refuse_zk_auth
from kafka_pyspark._messages.compression import MAX_GZIP_LEVEL
from kafka_pyspark._messages.layout import CODEC_ALIASES, CODEC_IDS, CODEC_NAMES
from kafka_pyspark._options.delivery_options import DeliveryOptions, parse_delivery_options
from kafka_pyspark._options.habits import unknown_option
from kafka_pyspark._options.option_names import (
    CLUSTER_OPTIONS,
    READ_OPTIONS,
    SPARK_SINK_OPTIONS,
    WRITE_OPTIONS,
    canonical_name,
)
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.option_values import int_option, int_value, topic_value
from kafka_pyspark._wire.protocol import INT32_MAX
from kafka_pyspark.errors import OptionError

__all__ = [
    "PARTITIONERS",
    "WriteOptions",
    "check_option_names",
    "parse_codec",
    "parse_level",
    "parse_write_options",
    "parse_write_options_only",
]

#: codecs of later Kafka versions, refused with a hint (they did not exist in 0.7)
_UNSUPPORTED_CODECS = ("lz4", "zstd", "3", "4")

PARTITIONERS = ("hash", "random")
_PARTITIONER_ALIASES: dict[str, str] = {
    "hash": "hash",
    "default": "hash",
    "kafka.producer.defaultpartitioner": "hash",
    "random": "random",
}

#: a sanity bound: a set of more messages than this cannot fit a 0.7 request anyway
MAX_BATCH_SIZE = 1_000_000


@dataclass(frozen=True)
class WriteOptions:
    """The parsed write options (picklable primitives only)."""

    topic: str | None = None
    codec: str = "none"
    #: gzip level (None: the encoder's default, ``encode.GZIP_DEFAULT_LEVEL``)
    compression_level: int | None = None
    batch_size: int = defaults.BATCH_SIZE
    max_message_size: int = defaults.MAX_MESSAGE_SIZE
    partitioner: str | None = None  # None: "hash" if there is a key column, else "random"
    #: the guarantee and its store (:mod:`.delivery_options`; needs the cluster options)
    delivery: DeliveryOptions = field(default_factory=DeliveryOptions)

    @property
    def codec_id(self) -> int:
        return CODEC_IDS[self.codec]


def parse_codec(raw: str) -> str:
    """``compression.codec`` value -> ``none``/``gzip``/``snappy`` (OptionError otherwise)."""
    value = str(raw).strip().lower()
    if value in CODEC_ALIASES:
        return CODEC_NAMES[CODEC_ALIASES[value]]
    if value in _UNSUPPORTED_CODECS:
        raise OptionError(
            "compression.codec",
            f"{raw!r} did not exist in Kafka 0.7; use none (0), gzip (1) or snappy (2)",
        )
    raise OptionError(
        "compression.codec", f"unknown codec {raw!r}; use none (0), gzip (1) or snappy (2)"
    )


def parse_level(opts: Mapping[str, str], codec: str) -> int | None:
    """``compression.level`` (lower-cased ``opts``): a gzip level 0-9, or None when unset."""
    if "compression.level" not in opts:
        return None
    if codec != "gzip":
        raise OptionError(
            "compression.level", f"is gzip's deflate level; compression.codec is {codec}"
        )
    return int_value("compression.level", opts["compression.level"], 0, MAX_GZIP_LEVEL)


def parse_write_options_only(options: Mapping[str, str]) -> WriteOptions:
    """The write options in ``options`` (other keys are ignored here)."""
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    topic = opts.get("topic")
    if topic is not None:
        topic_value("topic", topic)
    codec = parse_codec(opts["compression.codec"]) if "compression.codec" in opts else "none"
    level = parse_level(opts, codec)
    batch_size = int_option(opts, "batch.size", defaults.BATCH_SIZE, 1, MAX_BATCH_SIZE)
    max_message_size = int_option(opts, "max.message.size", defaults.MAX_MESSAGE_SIZE, 1, INT32_MAX)
    partitioner: str | None = None
    if "partitioner" in opts:
        raw = str(opts["partitioner"]).strip()
        partitioner = _PARTITIONER_ALIASES.get(raw.lower())
        if partitioner is None:
            raise OptionError(
                "partitioner", f"unknown partitioner {raw!r}; use one of {', '.join(PARTITIONERS)}"
            )
    return WriteOptions(
        topic=topic,
        codec=codec,
        compression_level=level,
        batch_size=batch_size,
        max_message_size=max_message_size,
        partitioner=partitioner,
    )


def check_option_names(options: Mapping[str, str]) -> None:
    """Unknown options are errors (a misspelt option must not be silently ignored)."""
    refuse_zk_auth(str(k).lower() for k in options)  # say why, not "unknown option"
    for key in sorted(str(k).lower() for k in options):
        if key in WRITE_OPTIONS or key in CLUSTER_OPTIONS or key in SPARK_SINK_OPTIONS:
            continue
        if key in READ_OPTIONS:
            raise OptionError(
                canonical_name(key), "is a read option; it has no meaning when writing"
            )
        if key == "path":
            raise OptionError(
                key,
                "kafka07 takes no path: name the topic with option('topic', ...) or a "
                "'topic' column",
            )
        known = (canonical_name(k) for k in WRITE_OPTIONS | CLUSTER_OPTIONS)
        raise unknown_option(key, "writing", known)


def parse_write_options(options: Mapping[str, str]) -> tuple[WriteOptions, ClusterOptions]:
    """All writer options: unknown names, bad values and conflicts raise :class:`OptionError`."""
    check_option_names(options)
    wopts, copts = parse_write_options_only(options), parse_cluster_options(options)
    lowered = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    delivery = parse_delivery_options(lowered, copts)
    return dataclasses.replace(wopts, delivery=delivery), copts
