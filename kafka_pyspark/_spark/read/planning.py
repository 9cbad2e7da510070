"""Planning a read: offset ranges -> Spark input partitions. Pure (no I/O, no Spark session).

A range is ``[start, end)`` of one broker-partition log (byte offsets): every message whose
offset is ``start <= offset < end``. Offsets are byte positions, so a range can only be cut
where a message is known to start: at a segment start (OFFSETS answers them), never by
arithmetic (Spark's ``KafkaOffsetRangeCalculator`` splits proportionally; that would land
inside messages here).

Steps (:func:`plan_partitions`):

1. Filters pushed by Spark (:func:`plan_filter`) drop whole broker-partitions (conditions on
   ``topic``, ``broker``, ``partition``: exact) and shrink ranges to the segments that can hold
   matching ``offset`` values (not exact: those filters stay with Spark too).
2. Empty ranges are dropped.
3. ``minPartitions``: while there are fewer ranges than asked, the largest range that has a
   segment start inside it is cut at the segment start nearest its middle
   (:func:`split_ranges`). Where the data has too few segments, fewer partitions result.
4. Without ``minPartitions``: one Spark partition per broker-partition, except that
   broker-partitions with less than ``fetch.size`` bytes to read are packed, per broker, into
   partitions of at most ``fetch.size`` bytes, read together by MULTIFETCH (one round trip)
   instead of one Spark task each (:func:`pack_ranges`).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.compat import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
)
from kafka_pyspark.client._fetch_types import FetchSettings, OffsetRange

if TYPE_CHECKING:
    from kafka_pyspark._options import ReadOptions

__all__ = [
    "Kafka07InputPartition",
    "PlanFilter",
    "TaskSettings",
    "pack_ranges",
    "plan_filter",
    "plan_partitions",
    "split_ranges",
]


@dataclass(frozen=True, slots=True)
class TaskSettings:
    """What a read task uses besides the fetcher's :class:`~kafka_pyspark.client.FetchSettings`
    (:mod:`.executor`): its connection's ``socket_timeout_ms`` and ``socket_buffer_size``,
    ``fail_on_data_loss`` (after OffsetOutOfRange) and ``batch_rows``/``batch_bytes`` (the
    bounds its Arrow batches are combined up to: Spark pays a fixed cost per batch). Frozen,
    primitives only, ``slots``: it pickles as its values."""

    fail_on_data_loss: bool = True
    socket_timeout_ms: int = defaults.SOCKET_TIMEOUT_MS
    socket_buffer_size: int = defaults.SOCKET_BUFFER_SIZE
    batch_rows: int = defaults.BATCH_ROWS
    batch_bytes: int = defaults.BATCH_BYTES

    @classmethod
    def of(cls, options: ReadOptions) -> TaskSettings:
        """The task settings of a read (its batch bounds are the defaults: no option sets them)."""
        return cls(
            fail_on_data_loss=options.fail_on_data_loss,
            socket_timeout_ms=options.cluster.socket_timeout_ms,
            socket_buffer_size=options.cluster.socket_buffer_size,
        )


@dataclass(frozen=True)
class Kafka07InputPartition(InputPartition):
    """One Spark task: ranges of one broker (several only when packed for MULTIFETCH), the
    settings its executor hands to the fetcher as they are (``fetch``: the read options' own)
    and its own (``task``)."""

    broker: int
    host: str
    port: int
    ranges: tuple[OffsetRange, ...]
    fetch: FetchSettings
    task: TaskSettings

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


# --- filters ----------------------------------------------------------------------------------

_CONSTANT_COLUMNS = {"topic": str, "broker": int, "partition": int}


def _typed(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


@dataclass(frozen=True)
class PlanFilter:
    """What the pushed filters let the plan skip.

    ``conditions``: ``(column, op, value)`` on ``topic``/``broker``/``partition`` (op one of
    ``eq in gt ge lt le ne notin``), all of which must hold; ``offset_low`` (inclusive) and
    ``offset_high`` (exclusive) bound the ``offset`` column; ``empty``: nothing can match.
    """

    conditions: tuple[tuple[str, str, Any], ...] = ()
    offset_low: int | None = None
    offset_high: int | None = None
    empty: bool = False

    def accepts(self, topic: str, broker: int, partition: int) -> bool:
        if self.empty:
            return False
        row = {"topic": topic, "broker": broker, "partition": partition}
        return all(_holds(row[col], op, value) for col, op, value in self.conditions)

    def narrow(self, rng: OffsetRange, segment_starts: Sequence[int] = ()) -> OffsetRange | None:
        """``rng`` cut to the known message boundaries around the offset bounds (None: empty).

        Boundaries are the range's own ends and the segment starts inside it.
        """
        if not self.accepts(rng.topic, rng.broker, rng.partition):
            return None
        start, end = rng.start, rng.end
        low, high = self.offset_low, self.offset_high
        if low is None and high is None:
            return rng if start < end else None
        inner = [s for s in segment_starts if start < s < end]
        bounds = [start, *sorted(inner), end]
        if low is not None and low > start:
            if low >= end:
                return None
            start = bounds[bisect.bisect_right(bounds, low) - 1]
        if high is not None and high < end:
            if high <= rng.start:
                return None
            end = bounds[bisect.bisect_left(bounds, high)]
        if start >= end:
            return None
        return OffsetRange(rng.topic, rng.broker, rng.partition, start, end)


def _holds(actual: Any, op: str, value: Any) -> bool:
    if op == "eq":
        return bool(actual == value)
    if op == "ne":
        return bool(actual != value)
    if op == "in":
        return actual in value
    if op == "notin":
        return actual not in value
    if op == "gt":
        return bool(actual > value)
    if op == "ge":
        return bool(actual >= value)
    if op == "lt":
        return bool(actual < value)
    if op == "le":
        return bool(actual <= value)
    raise ValueError(f"unknown op {op!r}")  # pragma: no cover - built by plan_filter only


_OPS: tuple[tuple[type, str], ...] = (
    (EqualTo, "eq"),
    (In, "in"),
    (GreaterThan, "gt"),
    (GreaterThanOrEqual, "ge"),
    (LessThan, "lt"),
    (LessThanOrEqual, "le"),
)


def _op_of(f: Filter) -> str | None:
    for cls, op in _OPS:
        if type(f) is cls:
            return op
    return None


def plan_filter(filters: Iterable[Filter]) -> tuple[PlanFilter, list[Filter]]:
    """Split Spark's pushed filters into what planning uses and what Spark must still apply.

    Fully handled (not returned): ``=``, ``IN``, ``>``, ``>=``, ``<``, ``<=`` and ``NOT`` of
    ``=``/``IN`` on ``topic``, ``broker``, ``partition`` (constant per broker-partition, so
    skipping a broker-partition is exact). ``offset`` comparisons narrow ranges to segment
    boundaries, which is not exact, so they are returned too. Everything else is returned
    unchanged. Every returned filter is one of the input objects (Spark checks identity).
    """
    conditions: list[tuple[str, str, Any]] = []
    window = _OffsetWindow()
    rest: list[Filter] = []
    for f in filters:
        negated = isinstance(f, Not)
        inner = f.child if isinstance(f, Not) else f
        op = _op_of(inner)
        attr = getattr(inner, "attribute", None)
        value: Any = getattr(inner, "value", None)
        column = attr[0] if isinstance(attr, tuple) and len(attr) == 1 else None
        if op is None or column is None:
            rest.append(f)
        elif column in _CONSTANT_COLUMNS:
            condition = _constant_condition(column, op, value, negated)
            if condition is None:
                rest.append(f)
            else:
                conditions.append(condition)
        elif column == "offset" and not negated:
            rest.append(f)  # narrowing is at segment granularity: Spark filters the rest
            window.narrow(op, value)
        else:
            rest.append(f)
    return window.plan(tuple(conditions)), rest


def _constant_condition(column: str, op: str, value: Any,
                        negated: bool) -> tuple[str, str, Any] | None:
    """The condition a filter on ``topic``/``broker``/``partition`` sets (None: Spark's)."""
    kind = _CONSTANT_COLUMNS[column]
    if op == "in":
        values = tuple(value) if isinstance(value, (tuple, list)) else ()
        if not values or any(v is not None and not _typed(v, kind) for v in values):
            return None
        if negated and any(v is None for v in values):
            return None  # x NOT IN (.., NULL) is never true: leave it to Spark
        members = frozenset(v for v in values if v is not None)
        return (column, "notin" if negated else "in", members)
    if not _typed(value, kind) or (negated and op != "eq"):
        return None
    return (column, "ne" if negated else op, value)


class _OffsetWindow:
    """The ``offset`` bounds the filters set so far: ``low`` inclusive, ``high`` exclusive."""

    def __init__(self) -> None:
        self.low: int | None = None
        self.high: int | None = None
        self.empty = False

    def narrow(self, op: str, value: Any) -> None:
        """Apply one (non-negated) comparison; a value of another type narrows nothing."""
        lo: int | None
        hi: int | None
        if op == "in":
            values = tuple(value) if isinstance(value, (tuple, list)) else ()
            if any(v is not None and not _typed(v, int) for v in values):
                return
            ints = [v for v in values if v is not None]
            if not ints:
                self.empty = True
                return
            lo, hi = min(ints), max(ints) + 1
        elif not _typed(value, int):
            return
        elif op == "eq":
            lo, hi = value, value + 1
        elif op == "gt":
            lo, hi = value + 1, None
        elif op == "ge":
            lo, hi = value, None
        elif op == "lt":
            lo, hi = None, value
        else:  # le
            lo, hi = None, value + 1
        if lo is not None:
            self.low = lo if self.low is None else max(self.low, lo)
        if hi is not None:
            self.high = hi if self.high is None else min(self.high, hi)

    def plan(self, conditions: tuple[tuple[str, str, Any], ...]) -> PlanFilter:
        empty = self.empty or (
            self.low is not None and self.high is not None and self.low >= self.high
        )
        return PlanFilter(conditions, self.low, self.high, empty)


# --- splitting and packing --------------------------------------------------------------------


def split_ranges(
    ranges: Sequence[OffsetRange],
    segment_starts: Mapping[TopicPartition, Sequence[int]],
    min_partitions: int,
) -> list[OffsetRange]:
    """Cut ranges at segment starts until there are ``min_partitions`` (where possible).

    Always the largest range that has a segment start strictly inside it is cut, at the
    segment start nearest its middle. The result covers exactly the same offsets, sorted by
    ``(topic, broker, partition, start)``. A piece is its range and the slice ``[lo, hi)`` of
    that range's sorted segment starts inside it, so a cut is a binary search (never a copy).
    """
    done: list[OffsetRange] = []
    heap: list[tuple[int, int, OffsetRange, tuple[int, ...], int, int]] = []
    seq = 0
    for r in ranges:
        if r.start >= r.end:
            continue
        inner = tuple(sorted({s for s in segment_starts.get(r.key, ()) if r.start < s < r.end}))
        heap.append((-r.size, seq, r, inner, 0, len(inner)))
        seq += 1
    heapq.heapify(heap)
    while heap and len(heap) + len(done) < min_partitions:
        _, _, r, inner, lo, hi = heapq.heappop(heap)
        if lo >= hi:
            done.append(r)
            continue
        i = _nearest(inner, lo, hi, r.start + r.size / 2)
        cut = inner[i]
        for piece, a, b in (
            (OffsetRange(r.topic, r.broker, r.partition, r.start, cut), lo, i),
            (OffsetRange(r.topic, r.broker, r.partition, cut, r.end), i + 1, hi),
        ):
            heapq.heappush(heap, (-piece.size, seq, piece, inner, a, b))
            seq += 1
    return sorted(done + [r for _, _, r, _, _, _ in heap])


def _nearest(starts: Sequence[int], lo: int, hi: int, middle: float) -> int:
    """The index in ``starts[lo:hi]`` (ascending, not empty) of the start nearest ``middle``;
    of two equally near, the smaller."""
    i = bisect.bisect_left(starts, middle, lo, hi)
    if i == hi:
        return hi - 1
    if i > lo and middle - starts[i - 1] <= starts[i] - middle:
        return i - 1
    return i


def pack_ranges(ranges: Sequence[OffsetRange], budget: int) -> list[tuple[OffsetRange, ...]]:
    """Group ranges for one partition each: ranges of ``budget`` bytes or more alone; smaller
    ones of the same broker together, in order, up to ``budget`` bytes per group."""
    groups: list[tuple[OffsetRange, ...]] = []
    # per broker: the open group and its size in bytes
    open_bins: dict[int, tuple[list[OffsetRange], int]] = {}
    for r in sorted(ranges):
        size = r.size
        if size >= budget:
            groups.append((r,))
            continue
        current = open_bins.get(r.broker)
        if current is not None and current[1] + size <= budget:
            current[0].append(r)
            open_bins[r.broker] = (current[0], current[1] + size)
        else:
            if current is not None:
                groups.append(tuple(current[0]))
            open_bins[r.broker] = ([r], size)
    groups.extend(tuple(members) for members, _ in open_bins.values())
    return sorted(groups, key=lambda g: g[0])


def plan_partitions(
    ranges: Sequence[OffsetRange],
    brokers: Mapping[int, tuple[str, int]],
    fetch: FetchSettings,
    task: TaskSettings,
    *,
    segment_starts: Mapping[TopicPartition, Sequence[int]] | None = None,
    min_partitions: int | None = None,
    pushed: PlanFilter | None = None,
) -> list[Kafka07InputPartition]:
    """Ranges -> input partitions (see the module docstring). ``brokers``: id -> (host, port);
    every partition carries ``fetch`` and ``task``."""
    starts = segment_starts or {}
    kept: list[OffsetRange] = []
    for r in ranges:
        narrowed: OffsetRange | None = r
        if pushed is not None:
            narrowed = pushed.narrow(r, starts.get(r.key, ()))
        if narrowed is not None and narrowed.start < narrowed.end:
            kept.append(narrowed)
    groups: list[tuple[OffsetRange, ...]]
    if min_partitions is not None:
        groups = [(r,) for r in split_ranges(kept, starts, min_partitions)]
    else:
        groups = pack_ranges(kept, fetch.fetch_size)
    out: list[Kafka07InputPartition] = []
    for group in groups:
        broker = group[0].broker
        host, port = brokers[broker]
        out.append(Kafka07InputPartition(broker, host, port, group, fetch, task))
    return out
