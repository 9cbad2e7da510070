"""The read options (batch and stream; docs/reading.md "Options"), parsed and checked once.

Pure: no sockets, no Spark session. The readers call :func:`parse_read_options` in their
``__init__``; :meth:`Kafka07DataSource.schema` calls :func:`validate_read_options` so that a bad
option fails at ``load()``, before any query runs.

    subscribe | subscribePattern | assign (exactly one), or topic: that one topic, so that a
                      SQL view of a topic can be read and written (docs/sql.md)
    startingOffsets   earliest | latest | group | {"topic": {"0-1": 1234, "0-2": -2}}
                      (default: batch earliest, stream latest)
    startingTimestamp epoch ms (instead of startingOffsets)
    endingOffsets     batch only: latest | JSON (default latest)
    group.id, failOnDataLoss (true), minPartitions, fetch.size (1048576),
    max.fetch.size (104857600), verifyChecksums (true), max.decompressed.size (67108864)
    maxBytesPerTrigger, commitToGroup (false), zk.outage.max.ms (600000): stream only
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kafka_pyspark._cluster import ClusterOptions, parse_cluster_options
from kafka_pyspark._cluster.zk_auth import refuse_zk_auth
from kafka_pyspark._options.habits import unknown_option, write_option_when_reading
from kafka_pyspark._options.option_names import (
    BATCH_ONLY_OPTIONS,
    CLUSTER_OPTIONS,
    READ_OPTIONS,
    STREAM_ONLY_OPTIONS,
    WRITE_OPTIONS,
    canonical_name,
    lower,
)
from kafka_pyspark._options.subscription import (
    Assign,
    Subscribe,
    Subscription,
    parse_assign,
    parse_pattern,
    parse_subscribe,
    partition_key_value,
)
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.option_values import (
    bool_option,
    int_option,
    int_value,
    json_value,
    topic_value,
)
from kafka_pyspark._shared.partition_key import TopicPartition, check_group_id, partition_key
from kafka_pyspark._wire.protocol import INT32_MAX, INT64_MAX, OFFSETS_EARLIEST
from kafka_pyspark.client._fetch_types import FetchSettings
from kafka_pyspark.errors import OptionError

#: ``topic``, the writer's option, read as a subscription of that one topic when no other is
#: given: a SQL view over a topic is then both a source and an INSERT target (docs/sql.md)
TOPIC = "topic"

__all__ = [
    "Mode",
    "OffsetSpec",
    "ReadOptions",
    "parse_offsets_json",
    "parse_read_options",
    "validate_read_options",
]

Mode = Literal["batch", "stream"]

OffsetKind = Literal["earliest", "latest", "group", "timestamp", "specific"]


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts (or ends).

    ``kind``: ``earliest``, ``latest``, ``group`` (the committed offsets of ``group.id``),
    ``timestamp`` (``startingTimestamp``) or ``specific`` (JSON). For ``specific``,
    ``offsets`` maps ``(topic, broker, partition)`` to a byte offset, or to -2 earliest / -1
    latest (``wire.OFFSETS_EARLIEST``/``OFFSETS_LATEST``); broker-partitions it does not name
    use ``default``.
    """

    kind: OffsetKind
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    default: Literal["earliest", "latest"] = "earliest"

    def __hash__(self) -> int:
        return hash((self.kind, tuple(sorted(self.offsets.items())), self.timestamp))


def parse_offsets_json(option: str, raw: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0-1": 1234, "0-2": -2}}`` -> ``{("topic", 0, 1): 1234, ...}``."""
    doc = json_value(option, raw)
    if not isinstance(doc, dict) or not doc:
        raise OptionError(
            option, f'must be a non-empty JSON object {{"topic": {{"0-1": 1234}}}}, got {raw!r}'
        )
    out: dict[TopicPartition, int] = {}
    for topic, parts in doc.items():
        topic_value(option, topic)
        if not isinstance(parts, dict) or not parts:
            raise OptionError(
                option,
                f'topic {topic!r}: expected a non-empty object {{"brokerId-partition": offset}}, '
                f"got {json.dumps(parts)}",
            )
        for key, value in parts.items():
            broker, partition = partition_key_value(option, topic, key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(
                    option,
                    f"topic {topic!r} {key}: offset must be an integer (a byte offset, -2 "
                    f"earliest, -1 latest), got {json.dumps(value)}",
                )
            if not OFFSETS_EARLIEST <= value <= INT64_MAX:
                raise OptionError(
                    option,
                    f"topic {topic!r} {key}: offset {value} is negative (only -2 earliest and "
                    "-1 latest are allowed)",
                )
            if out.get((topic, broker, partition), value) != value:
                raise OptionError(
                    option,
                    f"topic {topic!r}: broker-partition {partition_key(broker, partition)} is "
                    f"given twice (as {key!r}, with offsets {out[(topic, broker, partition)]} "
                    f"and {value})",
                )
            out[(topic, broker, partition)] = value
    return out


@dataclass(frozen=True)
class ReadOptions:
    """Every read option, parsed and checked (see the module docstring for defaults).

    ``fetch``: ``fetch.size``, ``max.fetch.size``, ``verifyChecksums`` and
    ``max.decompressed.size`` as the fetcher takes them (every input partition carries it)."""

    mode: Mode
    cluster: ClusterOptions
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    group_id: str | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    fetch: FetchSettings = field(default_factory=FetchSettings)
    max_bytes_per_trigger: int | None = None
    commit_to_group: bool = False
    zk_outage_max_ms: int = defaults.ZK_OUTAGE_MAX_MS


def _check_names(opts: Mapping[str, str], mode: Mode | None) -> None:
    refuse_zk_auth(opts)  # before "unknown option": say why it is refused
    for key in sorted(opts):
        if key in CLUSTER_OPTIONS or key in READ_OPTIONS:
            if mode == "batch" and key in STREAM_ONLY_OPTIONS:
                raise OptionError(
                    canonical_name(key),
                    "is a streaming option (spark.readStream); it has no meaning in a batch read",
                )
            if mode == "stream" and key in BATCH_ONLY_OPTIONS:
                raise OptionError(
                    canonical_name(key),
                    "is a batch option (spark.read); a stream has no end",
                )
            continue
        if key in ("path", "paths"):
            raise OptionError(
                key,
                "reads segment files (docs/segments.md) and conflicts with zk.connect/broker.list",
            )
        if key == TOPIC:
            continue
        if key in WRITE_OPTIONS:
            raise write_option_when_reading(key)
        known = (canonical_name(k) for k in CLUSTER_OPTIONS | READ_OPTIONS)
        raise unknown_option(key, "reading", known)


def _parse_subscription(opts: Mapping[str, str], cluster: ClusterOptions) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if TOPIC in opts:
        if given:
            raise OptionError(
                TOPIC, f"conflicts with {given[0]}: a read takes topic (the one topic of a view "
                "that is also written, docs/sql.md) or one of subscribe, subscribePattern, assign",
            )
        return Subscribe((topic_value(TOPIC, opts[TOPIC]),))
    if len(given) > 1:
        raise OptionError(
            given[1],
            f"conflicts with {given[0]}: give exactly one of subscribe, subscribePattern, assign",
        )
    if not given:
        raise OptionError(
            "subscribe", "one of subscribe, subscribePattern or assign (or topic) is required")
    raw = opts[given[0].lower()]
    if given[0] == "subscribe":
        return parse_subscribe(raw)
    if given[0] == "assign":
        return parse_assign(raw)
    sub = parse_pattern(raw)
    if cluster.zk_connect is None:
        raise OptionError(
            "subscribePattern",
            "needs zk.connect: topics are listed from the ZooKeeper registry (broker.list "
            "names brokers, not topics)",
        )
    return sub


def _parse_offset_spec(
    opts: Mapping[str, str],
    name: str,
    allowed: tuple[str, ...],
    default: Literal["earliest", "latest"],
) -> OffsetSpec:
    raw = opts.get(name.lower())
    if raw is None:
        return OffsetSpec(default, default=default)
    text = raw.strip()
    if text.lower() in allowed:
        kind: OffsetKind = text.lower()  # type: ignore[assignment]
        return OffsetSpec(kind, default=default)
    if text.startswith("{"):
        return OffsetSpec("specific", parse_offsets_json(name, text), default=default)
    words = ", ".join(allowed)
    raise OptionError(name, f'must be {words} or JSON {{"topic": {{"0-1": 1234}}}}, got {raw!r}')


def _check_offsets_subscribed(option: str, spec: OffsetSpec, sub: Subscription) -> None:
    for topic, broker, partition in sorted(spec.offsets):
        if isinstance(sub, Assign):
            if (topic, broker, partition) not in sub.partitions:
                raise OptionError(
                    option,
                    f"names topic {topic!r} {partition_key(broker, partition)}, which assign "
                    "does not",
                )
        elif not sub.allows(topic):
            what = "subscribe" if isinstance(sub, Subscribe) else "subscribePattern"
            raise OptionError(option, f"names topic {topic!r}, which {what} does not include")


def parse_read_options(options: Mapping[str, Any], mode: Mode = "batch") -> ReadOptions:
    """All read options for ``mode``; :class:`OptionError` naming the option on any problem.

    Unknown names, write options, options of the other mode, conflicts (``zk.connect`` and
    ``broker.list``; two of ``subscribe``/``subscribePattern``/``assign``;
    ``startingOffsets`` and ``startingTimestamp``), malformed JSON and out-of-range numbers
    are all errors.
    """
    if mode not in ("batch", "stream"):
        raise ValueError(f"mode must be 'batch' or 'stream', got {mode!r}")
    return _parse(options, mode)


def validate_read_options(options: Mapping[str, Any]) -> None:
    """Check read options valid in either mode (batch or stream is not known yet).

    For ``DataSource.schema()``, which Spark calls at ``load()`` for ``spark.read`` and
    ``spark.readStream`` alike; the reader re-checks the mode-specific options.
    """
    _parse(options, None)


def _parse(options: Mapping[str, Any], mode: Mode | None) -> ReadOptions:
    opts = lower(options)
    _check_names(opts, mode)
    cluster = parse_cluster_options(opts)
    sub = _parse_subscription(opts, cluster)
    starting = _parse_starting(opts, mode)
    ending = _parse_offset_spec(opts, "endingOffsets", ("latest",), "latest")
    _check_offsets_subscribed("startingOffsets", starting, sub)
    _check_offsets_subscribed("endingOffsets", ending, sub)
    _check_start_before_end(starting, ending)
    group_id = _parse_group_id(opts)
    commit = bool_option(opts, "commitToGroup", False)
    _check_group_needs(starting, commit, group_id, cluster)
    min_partitions: int | None = None
    if "minpartitions" in opts:
        min_partitions = int_value("minPartitions", opts["minpartitions"], 1, 1_000_000)
    max_bytes: int | None = None
    if "maxbytespertrigger" in opts:
        max_bytes = int_value("maxBytesPerTrigger", opts["maxbytespertrigger"], 1, INT64_MAX)
    return ReadOptions(
        mode=mode or "batch",
        cluster=cluster,
        subscription=sub,
        starting=starting,
        ending=ending,
        group_id=group_id,
        fail_on_data_loss=bool_option(opts, "failOnDataLoss", True),
        min_partitions=min_partitions,
        fetch=_parse_fetch(opts),
        max_bytes_per_trigger=max_bytes,
        commit_to_group=commit,
        zk_outage_max_ms=int_option(
            opts, "zk.outage.max.ms", defaults.ZK_OUTAGE_MAX_MS, 0, INT64_MAX
        ),
    )


def _parse_starting(opts: Mapping[str, str], mode: Mode | None) -> OffsetSpec:
    start_default: Literal["earliest", "latest"] = "latest" if mode == "stream" else "earliest"
    if "startingtimestamp" not in opts:
        return _parse_offset_spec(
            opts, "startingOffsets", ("earliest", "latest", "group"), start_default
        )
    if "startingoffsets" in opts:
        raise OptionError(
            "startingTimestamp",
            "conflicts with startingOffsets: give at most one of them",
        )
    ts = int_value("startingTimestamp", opts["startingtimestamp"], 0, INT64_MAX)
    return OffsetSpec("timestamp", timestamp=ts, default=start_default)


def _check_start_before_end(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind != "specific" or ending.kind != "specific":
        return
    for key, start in starting.offsets.items():
        end = ending.offsets.get(key)
        if start >= 0 and end is not None and end >= 0 and start > end:
            topic, broker, partition = key
            raise OptionError(
                "startingOffsets",
                f"topic {topic!r} {partition_key(broker, partition)}: start {start} is after "
                f"endingOffsets {end}",
            )


def _parse_group_id(opts: Mapping[str, str]) -> str | None:
    group_id = opts.get("group.id")
    if group_id is None:
        return None
    return check_group_id(group_id.strip())


def _check_group_needs(
    starting: OffsetSpec, commit: bool, group_id: str | None, cluster: ClusterOptions
) -> None:
    if starting.kind != "group" and not commit:
        return
    needing = "startingOffsets=group" if starting.kind == "group" else "commitToGroup"
    if group_id is None:
        raise OptionError("group.id", f"is required by {needing}")
    if cluster.zk_connect is None:
        raise OptionError(
            "zk.connect", f"{needing} needs zk.connect: 0.7 keeps group offsets in ZooKeeper"
        )


def _parse_fetch(opts: Mapping[str, str]) -> FetchSettings:
    """``fetch.size``, ``max.fetch.size`` (the default fetch size never exceeds the maximum),
    ``verifyChecksums`` and ``max.decompressed.size``, as the fetcher takes them."""
    max_fetch = int_option(opts, "max.fetch.size", defaults.MAX_FETCH_SIZE, 1, INT32_MAX)
    fetch = int_option(opts, "fetch.size", min(defaults.FETCH_SIZE, max_fetch), 1, INT32_MAX)
    if fetch > max_fetch:
        raise OptionError("fetch.size", f"{fetch} is larger than max.fetch.size ({max_fetch})")
    return FetchSettings(
        fetch_size=fetch,
        max_fetch_size=max_fetch,
        verify_crc=bool_option(opts, "verifyChecksums", True),
        max_decompressed_size=int_option(
            opts, "max.decompressed.size", defaults.MAX_DECOMPRESSED_SIZE, 1, INT64_MAX
        ),
    )
