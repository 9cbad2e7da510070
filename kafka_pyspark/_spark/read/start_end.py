"""Start and end byte offsets of a read: ``startingOffsets`` / ``endingOffsets`` resolved. Pure.

:func:`resolve_starts` / :func:`resolve_ends` turn the options' :class:`OffsetSpec` into byte
offsets with the log bounds OFFSETS gave (:mod:`.log_bounds`), checking them and applying
``failOnDataLoss``. The batch reader uses both; a stream uses :func:`resolve_starts` for its
initial offset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kafka_pyspark._options import OffsetSpec, canonical_name
from kafka_pyspark._shared.partition_key import TopicPartition, describe_tp, partition_key
from kafka_pyspark._spark.read.log_bounds import LogBounds
from kafka_pyspark._wire.protocol import OFFSETS_EARLIEST, OFFSETS_LATEST
from kafka_pyspark.errors import OptionError, data_loss_error, data_loss_skipped

__all__ = ["resolve_ends", "resolve_starts"]

log = logging.getLogger(__name__)


def _check_named(option: str, spec: OffsetSpec, tps: Sequence[TopicPartition]) -> None:
    known = set(tps)
    for tp in sorted(spec.offsets):
        if tp not in known:
            topic, broker, partition = tp
            raise OptionError(
                option,
                f"names topic {topic!r} {partition_key(broker, partition)}, which the cluster "
                f"does not have (it has: "
                f"{', '.join(partition_key(b, p) for t, b, p in sorted(known) if t == topic)})",
            )


def _data_loss(
    option: str,
    tp: TopicPartition,
    offset: int,
    bounds: LogBounds,
    fail: bool,
    origin: str,
) -> None:
    where = describe_tp(tp)
    if offset < bounds.earliest:
        what = (
            f"{where}: {origin} offset {offset} is no longer on the broker (earliest is "
            f"{bounds.earliest}; {bounds.earliest - offset} bytes deleted by retention)"
        )
    else:
        what = (
            f"{where}: {origin} offset {offset} is past the log end {bounds.latest} "
            "(the log was truncated or recreated)"
        )
    if fail:
        raise data_loss_error(
            f"{canonical_name(option)}: {what}",
            "read from the earliest available offset instead",
        )
    log.warning("%s", data_loss_skipped(
        what, f"reading from the earliest offset {bounds.earliest} instead"))


def resolve_starts(
    spec: OffsetSpec,
    tps: Sequence[TopicPartition],
    bounds: Mapping[TopicPartition, LogBounds],
    *,
    fail_on_data_loss: bool = True,
    committed: Mapping[TopicPartition, int] | None = None,
    before_time: Callable[[TopicPartition, int], int | None] | None = None,
    option: str = "startingOffsets",
    known: Sequence[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """Start offset per broker-partition.

    ``committed``: the group's offsets (``spec.kind == "group"``; partitions it never
    committed start at the earliest). ``before_time``: OFFSETS with a time
    (``spec.kind == "timestamp"``; None -> earliest). An explicit (JSON) offset past the log
    end is an :class:`OptionError`; any start before the earliest offset (or a committed
    offset past the end) is data loss: :class:`DataLossError`, or with
    ``fail_on_data_loss=False`` a warning and the earliest offset. JSON offsets must name
    broker-partitions in ``known`` (default ``tps``; pass every discovered one when ``tps`` is
    a filtered subset).
    """
    _check_named(option, spec, tps if known is None else known)
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        b = bounds[tp]
        kind = spec.kind
        if kind == "earliest":
            out[tp] = b.earliest
        elif kind == "latest":
            out[tp] = b.latest
        elif kind == "timestamp":
            if before_time is None or spec.timestamp is None:
                raise ValueError("startingTimestamp needs before_time")
            out[tp] = _timestamp_start(before_time(tp, spec.timestamp), b)
        elif kind == "group":
            out[tp] = _group_start(option, tp, (committed or {}).get(tp), b, fail_on_data_loss)
        else:
            out[tp] = _given_start(option, tp, spec, b, fail_on_data_loss)
    return out


def _timestamp_start(found: int | None, b: LogBounds) -> int:
    """OFFSETS' answer for a time, clamped into the log (no answer: the earliest offset)."""
    return b.earliest if found is None else min(max(found, b.earliest), b.latest)


def _group_start(option: str, tp: TopicPartition, offset: int | None, b: LogBounds,
                 fail_on_data_loss: bool) -> int:
    """The group's committed offset; never committed: earliest; outside the log: data loss."""
    if offset is None:
        return b.earliest
    if b.earliest <= offset <= b.latest:
        return offset
    _data_loss(option, tp, offset, b, fail_on_data_loss, "the group's committed")
    return b.earliest


def _given_start(option: str, tp: TopicPartition, spec: OffsetSpec, b: LogBounds,
                 fail_on_data_loss: bool) -> int:
    """A JSON start: the named offset (or -2/-1), else the spec's default for the rest."""
    value = spec.offsets.get(tp)
    if value is None:
        return b.earliest if spec.default == "earliest" else b.latest
    if value == OFFSETS_EARLIEST:
        return b.earliest
    if value == OFFSETS_LATEST:
        return b.latest
    if value > b.latest:
        raise OptionError(
            option, f"{describe_tp(tp)}: offset {value} is past the log end {b.latest}"
        )
    if value < b.earliest:
        _data_loss(option, tp, value, b, fail_on_data_loss, "the requested")
        return b.earliest
    return value


def resolve_ends(
    spec: OffsetSpec,
    tps: Sequence[TopicPartition],
    bounds: Mapping[TopicPartition, LogBounds],
    starts: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool = True,
    option: str = "endingOffsets",
    known: Sequence[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """End offset (exclusive) per broker-partition; never before its start.

    ``latest`` (the default) is the flushed log end at planning time: the read is a snapshot.
    A JSON end past the log end, or before the start, is an :class:`OptionError`; an end
    before the earliest offset means the whole range was deleted (data loss, as for starts;
    with ``fail_on_data_loss=False`` the range is empty). ``known``: as for
    :func:`resolve_starts`.
    """
    _check_named(option, spec, tps if known is None else known)
    out: dict[TopicPartition, int] = {}
    for tp in tps:
        b = bounds[tp]
        start = starts[tp]
        value = spec.offsets.get(tp) if spec.kind == "specific" else None
        if spec.kind == "latest" or value is None or value == OFFSETS_LATEST:
            end = b.latest
        elif value == OFFSETS_EARLIEST:
            end = b.earliest
        elif value > b.latest:
            raise OptionError(
                option, f"{describe_tp(tp)}: offset {value} is past the log end {b.latest}"
            )
        elif value < b.earliest:
            if fail_on_data_loss:
                raise data_loss_error(
                    f"endingOffsets: {describe_tp(tp)}: offset {value} is before the earliest "
                    f"offset {b.earliest}: the whole range was deleted by retention",
                    "skip it",
                )
            log.warning("%s: endingOffsets %d is before the earliest offset %d; nothing to read",
                        describe_tp(tp), value, b.earliest)
            end = start
        else:
            end = value
        if end < start:
            raise OptionError(
                option,
                f"{describe_tp(tp)}: end {end} is before the start {start} "
                f"({'latest' if value is None or value == OFFSETS_LATEST else 'as given'})",
            )
        out[tp] = end
    return out
