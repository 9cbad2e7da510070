"""Planning and offset resolution: pure (no sockets, no Spark session)."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from kafka_pyspark._options import OffsetSpec, parse_read_options
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.log_bounds import LogBounds
from kafka_pyspark._spark.read.planning import (
    Kafka07InputPartition,
    PlanFilter,
    TaskSettings,
    pack_ranges,
    plan_filter,
    plan_partitions,
    split_ranges,
)
from kafka_pyspark._spark.read.start_end import resolve_ends, resolve_starts
from kafka_pyspark.client import FetchSettings, OffsetRange
from kafka_pyspark.errors import DataLossError, OptionError

if TYPE_CHECKING:
    from _typeshed import TraceFunction

BROKERS = {0: ("h0", 9000), 1: ("h1", 9001)}
SETTINGS = FetchSettings(fetch_size=1000)
TASK = TaskSettings(batch_rows=300)


def R(topic: str, broker: int, partition: int, start: int, end: int) -> OffsetRange:
    return OffsetRange(topic, broker, partition, start, end)


# --- filters -----------------------------------------------------------------------------------


def test_constant_column_filters_fully_handled() -> None:
    fs = [
        EqualTo(("topic",), "a"),
        In(("broker",), (0, 1)),
        GreaterThanOrEqual(("partition",), 1),
        LessThan(("partition",), 3),
        Not(EqualTo(("partition",), 2)),
    ]
    pf, rest = plan_filter(fs)
    assert rest == []
    assert pf.accepts("a", 0, 1) and pf.accepts("a", 1, 1)
    assert not pf.accepts("b", 0, 1)  # topic
    assert not pf.accepts("a", 2, 1)  # broker
    assert not pf.accepts("a", 0, 0)  # partition >= 1
    assert not pf.accepts("a", 0, 2)  # partition != 2
    assert not pf.accepts("a", 0, 3)  # partition < 3


def test_string_comparisons_on_topic() -> None:
    pf, rest = plan_filter([GreaterThan(("topic",), "b"), LessThanOrEqual(("topic",), "d")])
    assert rest == []
    assert [t for t in "abcde" if pf.accepts(t, 0, 0)] == ["c", "d"]


def test_unsupported_filters_returned_by_identity() -> None:
    fs = [
        EqualTo(("value",), b"x"),
        StringStartsWith(("topic",), "a"),
        EqualNullSafe(("broker",), 1),
        IsNotNull(("topic",)),
        EqualTo(("broker",), "1"),  # wrong type: leave to Spark
        EqualTo(("broker",), True),
        Not(GreaterThan(("broker",), 1)),
        Not(In(("broker",), (1, None))),
        EqualTo(("a", "b"), 1),
    ]
    pf, rest = plan_filter(fs)
    assert all(r is f for r, f in zip(rest, fs, strict=True))
    assert pf.conditions == ()


def test_in_with_null_ignores_null() -> None:
    pf, rest = plan_filter([In(("broker",), (1, None))])
    assert rest == [] and pf.accepts("t", 1, 0) and not pf.accepts("t", 0, 0)


def test_offset_filters_narrow_but_stay_with_spark() -> None:
    fs = [GreaterThanOrEqual(("offset",), 150), LessThan(("offset",), 420)]
    pf, rest = plan_filter(fs)
    assert rest == fs
    assert (pf.offset_low, pf.offset_high) == (150, 420)
    # segments start at 0, 100, 200, 300, 400, 500; the range is [0, 600)
    r = R("t", 0, 0, 0, 600)
    starts = [0, 100, 200, 300, 400, 500]
    assert pf.narrow(r, starts) == R("t", 0, 0, 100, 500)
    # exact boundaries
    pf2, _ = plan_filter([GreaterThanOrEqual(("offset",), 200), LessThan(("offset",), 400)])
    assert pf2.narrow(r, starts) == R("t", 0, 0, 200, 400)
    # no segment starts known: only whole-range decisions
    assert pf.narrow(r) == r
    assert pf.narrow(R("t", 0, 0, 420, 600)) is None
    assert pf.narrow(R("t", 0, 0, 0, 150)) is None
    assert pf.narrow(R("t", 0, 0, 0, 151)) == R("t", 0, 0, 0, 151)


@pytest.mark.parametrize(
    ("f", "low", "high"),
    [
        (EqualTo(("offset",), 7), 7, 8),
        (In(("offset",), (9, 3, None)), 3, 10),
        (GreaterThan(("offset",), 7), 8, None),
        (LessThanOrEqual(("offset",), 7), None, 8),
    ],
)
def test_offset_bounds(f: Filter, low: int | None, high: int | None) -> None:
    pf, rest = plan_filter([f])
    assert rest == [f]
    assert (pf.offset_low, pf.offset_high) == (low, high)


def test_contradictory_offset_filters_empty() -> None:
    pf, _ = plan_filter([GreaterThan(("offset",), 10), LessThan(("offset",), 5)])
    assert pf.empty and not pf.accepts("t", 0, 0)
    pf, _ = plan_filter([In(("offset",), (None,))])
    assert pf.empty


# --- splitting ---------------------------------------------------------------------------------


def test_split_largest_first_at_segment_starts() -> None:
    ranges = [R("t", 0, 0, 0, 1000), R("t", 0, 1, 0, 100)]
    starts = {("t", 0, 0): [0, 250, 500, 750], ("t", 0, 1): [0, 50]}
    out = split_ranges(ranges, starts, 3)
    assert out == [R("t", 0, 0, 0, 500), R("t", 0, 0, 500, 1000), R("t", 0, 1, 0, 100)]
    out = split_ranges(ranges, starts, 5)
    assert out == [
        R("t", 0, 0, 0, 250), R("t", 0, 0, 250, 500), R("t", 0, 0, 500, 750),
        R("t", 0, 0, 750, 1000), R("t", 0, 1, 0, 100),
    ]


def test_split_stops_where_data_has_no_boundaries() -> None:
    ranges = [R("t", 0, 0, 0, 1000), R("t", 0, 1, 10, 20)]
    out = split_ranges(ranges, {("t", 0, 0): [0, 600]}, 10)
    assert out == [R("t", 0, 0, 0, 600), R("t", 0, 0, 600, 1000), R("t", 0, 1, 10, 20)]


def test_split_ignores_starts_outside_range() -> None:
    out = split_ranges([R("t", 0, 0, 300, 700)], {("t", 0, 0): [0, 100, 300, 500, 900]}, 4)
    assert out == [R("t", 0, 0, 300, 500), R("t", 0, 0, 500, 700)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5000), st.integers(0, 5000),
                  st.lists(st.integers(0, 5000), max_size=12)),
        min_size=1, max_size=6,
    ),
    st.integers(1, 40),
)
def test_split_properties(spec: list[tuple[int, int, list[int]]], want: int) -> None:
    ranges, starts = [], {}
    for i, (a, b, segs) in enumerate(spec):
        lo, hi = min(a, b), max(a, b)
        ranges.append(R("t", 0, i, lo, hi))
        starts[("t", 0, i)] = segs
    out = split_ranges(ranges, starts, want)
    # exactly the same offsets, no overlap, cuts only at segment starts
    for i, r in enumerate(ranges):
        pieces = [p for p in out if p.partition == i]
        if r.start == r.end:
            assert pieces == []
            continue
        assert pieces[0].start == r.start and pieces[-1].end == r.end
        for x, y in itertools.pairwise(pieces):
            assert x.end == y.start and y.start in starts[r.key]
    splittable = sum(
        len({s for s in starts[r.key] if r.start < s < r.end}) + 1
        for r in ranges if r.start < r.end
    )
    nonempty = sum(1 for r in ranges if r.start < r.end)
    assert len(out) == max(nonempty, min(want, splittable))


# --- packing and partitions --------------------------------------------------------------------


def test_pack_small_ranges_per_broker() -> None:
    ranges = [
        R("a", 0, 0, 0, 400), R("a", 0, 1, 0, 400), R("a", 0, 2, 0, 400),
        R("a", 1, 0, 0, 300), R("b", 1, 0, 0, 300), R("a", 0, 3, 0, 5000),
    ]
    groups = pack_ranges(ranges, 1000)
    assert groups == [
        (R("a", 0, 0, 0, 400), R("a", 0, 1, 0, 400)),
        (R("a", 0, 2, 0, 400),),
        (R("a", 0, 3, 0, 5000),),
        (R("a", 1, 0, 0, 300), R("b", 1, 0, 0, 300)),
    ]


def test_plan_partitions_drops_empty_and_packs() -> None:
    ranges = [R("a", 0, 0, 0, 0), R("a", 0, 1, 10, 5000), R("a", 1, 0, 0, 10),
              R("a", 1, 1, 5, 20)]
    parts = plan_partitions(ranges, BROKERS, SETTINGS, TASK)
    assert [(p.broker, p.host, p.port, p.ranges) for p in parts] == [
        (0, "h0", 9000, (R("a", 0, 1, 10, 5000),)),
        (1, "h1", 9001, (R("a", 1, 0, 0, 10), R("a", 1, 1, 5, 20))),
    ]
    assert all(p.fetch == SETTINGS and p.task == TASK for p in parts)


def test_plan_partitions_min_partitions_disables_packing() -> None:
    ranges = [R("a", 1, 0, 0, 10), R("a", 1, 1, 5, 20)]
    parts = plan_partitions(ranges, BROKERS, SETTINGS, TASK, min_partitions=1)
    assert [p.ranges for p in parts] == [(R("a", 1, 0, 0, 10),), (R("a", 1, 1, 5, 20),)]
    parts = plan_partitions(
        [R("a", 0, 0, 0, 3000)], BROKERS, SETTINGS, TASK,
        segment_starts={("a", 0, 0): [0, 1000, 2000]}, min_partitions=3,
    )
    assert [p.ranges[0] for p in parts] == [
        R("a", 0, 0, 0, 1000), R("a", 0, 0, 1000, 2000), R("a", 0, 0, 2000, 3000)
    ]


def test_plan_partitions_with_filter() -> None:
    pf, _ = plan_filter([EqualTo(("broker",), 1), GreaterThanOrEqual(("offset",), 1500)])
    parts = plan_partitions(
        [R("a", 0, 0, 0, 3000), R("a", 1, 0, 0, 3000)], BROKERS, SETTINGS, TASK,
        segment_starts={("a", 1, 0): [0, 1000, 2000]}, pushed=pf,
    )
    assert [p.ranges for p in parts] == [(R("a", 1, 0, 1000, 3000),)]


def test_partition_is_picklable_input_partition() -> None:
    from pyspark.sql.datasource import InputPartition

    p = Kafka07InputPartition(0, "h", 1, (R("a", 0, 0, 0, 5),), SETTINGS, TASK)
    assert isinstance(p, InputPartition)
    assert pickle.loads(pickle.dumps(p)) == p
    assert p.size == 5
    assert PlanFilter() == pickle.loads(pickle.dumps(PlanFilter()))


def test_partition_pickles_its_settings_and_ranges_as_values() -> None:
    # Spark ships one pickled input partition per task: the settings and every range go as
    # their values, not as dicts naming each field again
    ranges = tuple(R("a", 0, p, 0, 5) for p in range(8))
    data = pickle.dumps(Kafka07InputPartition(0, "h", 1, ranges, SETTINGS, TASK))
    for name in ("fetch_size", "verify_crc", "batch_rows", "fail_on_data_loss", "topic", "start",
                 "end"):
        assert name.encode() not in data


def test_fetch_and_task_settings_from_the_parsed_options() -> None:
    options = parse_read_options({
        "broker.list": "0:h:1", "subscribe": "t", "fetch.size": "4096",
        "max.fetch.size": "8192", "verifyChecksums": "false", "max.decompressed.size": "100",
        "failOnDataLoss": "false", "socket.timeout.ms": "250", "socket.buffersize": "1024",
    })
    assert options.fetch == FetchSettings(
        fetch_size=4096, max_fetch_size=8192, verify_crc=False, max_decompressed_size=100,
    )
    assert TaskSettings.of(options) == TaskSettings(
        fail_on_data_loss=False, socket_timeout_ms=250, socket_buffer_size=1024,
    )


# --- offset resolution -------------------------------------------------------------------------

A = ("t", 0, 0)
B = ("t", 0, 1)
BOUNDS = {A: LogBounds(100, 900, (100, 500)), B: LogBounds(0, 0, ())}


def test_resolve_earliest_latest() -> None:
    assert resolve_starts(OffsetSpec("earliest"), [A, B], BOUNDS) == {A: 100, B: 0}
    assert resolve_starts(OffsetSpec("latest"), [A, B], BOUNDS) == {A: 900, B: 0}
    starts = {A: 100, B: 0}
    assert resolve_ends(OffsetSpec("latest"), [A, B], BOUNDS, starts) == {A: 900, B: 0}


def test_resolve_json() -> None:
    spec = OffsetSpec("specific", {A: 300}, default="earliest")
    assert resolve_starts(spec, [A, B], BOUNDS) == {A: 300, B: 0}
    spec = OffsetSpec("specific", {A: -1, B: -2})
    assert resolve_starts(spec, [A, B], BOUNDS) == {A: 900, B: 0}
    end = OffsetSpec("specific", {A: 500}, default="latest")
    assert resolve_ends(end, [A, B], BOUNDS, {A: 100, B: 0}) == {A: 500, B: 0}


def test_resolve_json_errors() -> None:
    with pytest.raises(OptionError) as info:
        resolve_starts(OffsetSpec("specific", {A: 901}), [A], BOUNDS)
    assert info.value.option == "startingOffsets" and "901" in str(info.value)
    with pytest.raises(OptionError) as info:
        resolve_starts(OffsetSpec("specific", {("t", 5, 5): 1}), [A], BOUNDS)
    assert "5-5" in str(info.value)
    with pytest.raises(OptionError) as info:
        resolve_ends(OffsetSpec("specific", {A: 950}), [A], BOUNDS, {A: 100})
    assert info.value.option == "endingOffsets"
    with pytest.raises(OptionError):  # end before start
        resolve_ends(OffsetSpec("specific", {A: 200}), [A], BOUNDS, {A: 500})


def test_data_loss_on_start_before_earliest() -> None:
    spec = OffsetSpec("specific", {A: 40})
    with pytest.raises(DataLossError) as info:
        resolve_starts(spec, [A], BOUNDS)
    text = str(info.value)
    assert "'t'" in text and "broker 0" in text and "partition 0" in text and "40" in text
    assert resolve_starts(spec, [A], BOUNDS, fail_on_data_loss=False) == {A: 100}


def test_data_loss_on_end_before_earliest() -> None:
    spec = OffsetSpec("specific", {A: 50})
    with pytest.raises(DataLossError):
        resolve_ends(spec, [A], BOUNDS, {A: 100})
    assert resolve_ends(spec, [A], BOUNDS, {A: 100}, fail_on_data_loss=False) == {A: 100}


def test_resolve_group() -> None:
    spec = OffsetSpec("group")
    assert resolve_starts(spec, [A, B], BOUNDS, committed={A: 500}) == {A: 500, B: 0}
    with pytest.raises(DataLossError):
        resolve_starts(spec, [A], BOUNDS, committed={A: 50})
    with pytest.raises(DataLossError):  # committed past the end: log recreated
        resolve_starts(spec, [A], BOUNDS, committed={A: 5000})
    assert resolve_starts(spec, [A], BOUNDS, committed={A: 50}, fail_on_data_loss=False) == {
        A: 100
    }


def test_resolve_timestamp() -> None:
    spec = OffsetSpec("timestamp", timestamp=123)
    seen: list[tuple[TopicPartition, int]] = []

    def before(tp: TopicPartition, ts: int) -> int | None:
        seen.append((tp, ts))
        return 500 if tp == A else None

    assert resolve_starts(spec, [A, B], BOUNDS, before_time=before) == {A: 500, B: 0}
    assert seen == [(A, 123), (B, 123)]


# --- planning cost grows linearly with the number of ranges --------------------------------------


def _planning_steps(fn: Callable[[], object]) -> int:
    """Python lines executed in :mod:`kafka_pyspark._spark.read.planning` (generator steps
    included) while ``fn`` runs: a count of the work done, unlike a time, exact and
    independent of the machine's load."""
    import sys

    from kafka_pyspark._spark.read import planning

    target = planning.__file__
    steps = 0

    def local(frame: FrameType, event: str, arg: Any) -> TraceFunction:
        nonlocal steps
        if event == "line":
            steps += 1
        return local

    def trace(frame: FrameType, event: str, arg: Any) -> TraceFunction | None:
        return local if frame.f_code.co_filename == target else None

    saved = sys.gettrace()
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(saved)
    return steps


def _growth(make: Callable[[int], Callable[[], object]], small: int) -> float:
    """How many times the steps of a plan of ``10 * small`` ranges exceed those of ``small``."""
    return _planning_steps(make(10 * small)) / _planning_steps(make(small))


def test_packing_steps_grow_linearly() -> None:
    """Many small ranges of one broker pack into few partitions: the work is linear in the
    number of ranges (a running total per group, not a sum over the group at every range)."""
    def plan(n: int) -> Callable[[], object]:
        ranges = [R("t", b, p, 0, 10) for b in (0, 1) for p in range(n // 2)]
        settings = FetchSettings(fetch_size=1 << 30)  # everything of a broker fits one group
        return lambda: plan_partitions(ranges, BROKERS, settings, TASK)

    parts = plan(3000)()
    assert isinstance(parts, list) and [len(p.ranges) for p in parts] == [1500, 1500]
    assert _growth(plan, 300) < 15  # linear: 10; quadratic: 100


def test_splitting_steps_grow_linearly() -> None:
    """Cutting a range with many segment starts for ``minPartitions``, where the start nearest
    the middle is always the last one (segment sizes double): each cut is a binary search,
    not a scan of the remaining starts."""
    def plan(n: int) -> Callable[[], object]:
        starts = [0] + [1 << i for i in range(n)]
        ranges = [R("t", 0, 0, 0, 1 << n)]
        return lambda: plan_partitions(ranges, BROKERS, SETTINGS, TASK, min_partitions=n + 1,
                                       segment_starts={("t", 0, 0): starts})

    parts = plan(90)()
    assert isinstance(parts, list) and len(parts) == 91
    assert _growth(plan, 90) < 15  # (offsets up to 2**900: a float holds the middle)
