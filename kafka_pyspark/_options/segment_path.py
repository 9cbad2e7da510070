"""Options of a read from segment files (``path``; docs/segments.md). Pure: no I/O.

    path | paths          segment file, partition directory or log directory (local or a URI
                          pyarrow.fs opens); instead of zk.connect / broker.list
    subscribe | subscribePattern     topics, matched against the directory names (optional)
    broker (0)            fills the broker column (the files do not say which broker wrote them)
    failOnDataLoss (true), verifyChecksums (true), max.decompressed.size (67108864)
    maxPartitionBytes (1 GiB + 64 MiB): larger files are cut at entry boundaries
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_pyspark._options.habits import unknown_option, write_option_when_reading
from kafka_pyspark._options.option_names import (
    CLUSTER_OPTIONS,
    READ_OPTIONS,
    WRITE_OPTIONS,
    canonical_name,
    lower,
)
from kafka_pyspark._options.subscription import (
    Subscribe,
    SubscribePattern,
    parse_pattern,
    parse_subscribe,
)
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.option_values import bool_option, int_option
from kafka_pyspark._wire.protocol import INT32_MAX, INT64_MAX
from kafka_pyspark.errors import OptionError

# Kafka's segments are 1 GiB by default (0.7 lets one run past that by a message set): such
# files stay whole; larger ones are cut.
DEFAULT_MAX_PARTITION_BYTES = (1 << 30) + (64 << 20)
MIN_PARTITION_BYTES = 1 << 20

_OWN = ("path", "paths", "broker", "subscribe", "subscribePattern", "failOnDataLoss",
        "verifyChecksums", "max.decompressed.size", "maxPartitionBytes")
_CANONICAL = {n.lower(): n for n in _OWN}
#: lower-cased names of the options a segment-file read takes
SEGMENT_OPTIONS = frozenset(_CANONICAL)


@dataclass(frozen=True)
class SegmentOptions:
    paths: tuple[str, ...]
    broker: int = 0
    subscription: Subscribe | SubscribePattern | None = None
    fail_on_data_loss: bool = True
    verify_checksums: bool = True
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES


def has_path(options: Mapping[str, Any]) -> bool:
    """Whether ``options`` ask for a read from segment files."""
    return any(str(k).lower() in ("path", "paths") for k in options)


def _check_names(opts: Mapping[str, str]) -> None:
    for key in sorted(opts):
        if key in _CANONICAL:
            continue
        name = canonical_name(key)
        if key in ("zk.connect", "broker.list"):
            raise OptionError("path", f"conflicts with {name}: give either path (segment "
                              "files) or zk.connect / broker.list (a live cluster)")
        if key in CLUSTER_OPTIONS or key in READ_OPTIONS:
            hint = ("; filter on the offset column instead" if "offsets" in key
                    or key == "startingtimestamp" else "")
            raise OptionError(name, f"has no meaning when reading segment files (path){hint}")
        if key in WRITE_OPTIONS:
            raise write_option_when_reading(key)
        raise unknown_option(key, "reading segment files", _OWN)


def _paths(opts: Mapping[str, str]) -> tuple[str, ...]:
    found: list[str] = []
    if "paths" in opts:
        try:
            doc = json.loads(opts["paths"])
        except ValueError as e:
            raise OptionError("paths", f"is not a JSON list of paths: {e}") from e
        if not isinstance(doc, list) or not all(isinstance(p, str) for p in doc):
            raise OptionError("paths", f"is not a JSON list of paths: {opts['paths']!r}")
        found.extend(doc)
    if "path" in opts:
        found.append(opts["path"])
    paths = tuple(p.strip() for p in found)
    if not paths or any(not p for p in paths):
        raise OptionError("path", "is empty")
    return paths


def parse_segment_options(options: Mapping[str, Any]) -> SegmentOptions:
    """Parse and check the options of a segment-file read; :class:`OptionError` names the
    option at fault (conflicts name both)."""
    opts = lower(options)
    _check_names(opts)
    sub: Subscribe | SubscribePattern | None = None
    if "subscribe" in opts and "subscribepattern" in opts:
        raise OptionError("subscribePattern", "conflicts with subscribe: give at most one")
    if "subscribe" in opts:
        sub = parse_subscribe(opts["subscribe"])
    elif "subscribepattern" in opts:
        sub = parse_pattern(opts["subscribepattern"])
    return SegmentOptions(
        paths=_paths(opts),
        broker=int_option(opts, "broker", 0, 0, INT32_MAX),
        subscription=sub,
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        verify_checksums=bool_option(opts, "verifyChecksums", True),
        max_decompressed_size=int_option(opts, "max.decompressed.size",
                                         defaults.MAX_DECOMPRESSED_SIZE, 1, INT64_MAX),
        max_partition_bytes=int_option(opts, "maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES,
                                       MIN_PARTITION_BYTES, INT64_MAX),
    )
