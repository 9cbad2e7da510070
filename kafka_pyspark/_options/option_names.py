"""The option names: which option belongs to which mode, and how the documentation spells it.

Spark hands options over with lower-cased names (a ``CaseInsensitiveDict``); errors name the
option as the user documentation spells it (``startingOffsets``, not ``startingoffsets``):
:func:`canonical_name`. ``tests/test_docs_options.py`` checks every ``*_OPTIONS`` set here
against the option tables in ``docs/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_pyspark._cluster import CLUSTER_NAMES
from kafka_pyspark._options.delivery_options import DELIVERY_NAMES
from kafka_pyspark._shared.option_values import lower_options

__all__ = [
    "BATCH_ONLY_OPTIONS",
    "CLUSTER_OPTIONS",
    "READ_OPTIONS",
    "SPARK_SINK_OPTIONS",
    "STREAM_ONLY_OPTIONS",
    "WRITE_OPTIONS",
    "canonical_name",
    "lower",
]

# Canonical spellings (as documented).
_COMMON_READ_NAMES = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "group.id",
    "failOnDataLoss",
    "minPartitions",
    "fetch.size",
    "max.fetch.size",
    "verifyChecksums",
    "max.decompressed.size",
)
_BATCH_ONLY_NAMES = ("endingOffsets",)
_STREAM_ONLY_NAMES = ("maxBytesPerTrigger", "commitToGroup", "zk.outage.max.ms")
_WRITE_NAMES = (
    "topic", "compression.codec", "compression.level", "batch.size", "max.message.size",
    "partitioner",
    *DELIVERY_NAMES,
)

_CANONICAL: dict[str, str] = {
    n.lower(): n
    for n in (*CLUSTER_NAMES, *_COMMON_READ_NAMES, *_BATCH_ONLY_NAMES, *_STREAM_ONLY_NAMES)
}

#: lower-cased names of the cluster options (every mode)
CLUSTER_OPTIONS = frozenset(n.lower() for n in CLUSTER_NAMES)
#: lower-cased names of every read option (batch or stream; not the cluster options)
READ_OPTIONS = frozenset(
    n.lower() for n in (*_COMMON_READ_NAMES, *_BATCH_ONLY_NAMES, *_STREAM_ONLY_NAMES)
)
BATCH_ONLY_OPTIONS = frozenset(n.lower() for n in _BATCH_ONLY_NAMES)
STREAM_ONLY_OPTIONS = frozenset(n.lower() for n in _STREAM_ONLY_NAMES)
#: lower-cased names of the writer's own options (:mod:`.write_options`)
WRITE_OPTIONS = frozenset(_WRITE_NAMES)
#: options Spark itself adds to a streaming sink's options, accepted and ignored by the writers:
#: ``checkpointLocation`` (from the option or a Declarative Pipelines flow) and ``queryName``
#: (``DataStreamWriter.queryName``, and every pipelines flow), in classic Spark and Spark Connect
#: alike. Spark adds nothing to a reader's options, nor to a batch writer's (``foreachBatch``
#: included); a ``path`` comes only from the user's own ``load(path)``/``save(path)``.
SPARK_SINK_OPTIONS = frozenset({"checkpointlocation", "queryname"})


def canonical_name(name: str) -> str:
    """The documented spelling of an option name (``startingoffsets`` -> ``startingOffsets``)."""
    return _CANONICAL.get(name.lower(), name)


def lower(options: Mapping[str, Any]) -> dict[str, str]:
    """Spark's view of ``options``: lower-cased names, string values (None is an error)."""
    return lower_options(options, canonical_name)
