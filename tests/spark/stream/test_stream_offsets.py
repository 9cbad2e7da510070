"""Pure tests of the stream offset format (checkpoint), topology merging (discovery)
and admission control (admission)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.discovery import diff_topology, merge_topology
from kafka_pyspark._spark.stream.admission import (
    admit,
    cap_to_target,
    next_ages,
    water_fill,
)
from kafka_pyspark._spark.stream.checkpoint import (
    OffsetDicts,
    Offsets,
    from_offset_dict,
    parse_partition_key,
    to_offset_dict,
)
from kafka_pyspark._spark.stream.scan import Scan, Windows
from kafka_pyspark.errors import OffsetFormatError

A: TopicPartition = ("a", 0, 0)
B: TopicPartition = ("a", 0, 1)
C: TopicPartition = ("b", 1, 0)


class FakeLog:
    """Synthetic logs: per partition, consecutive messages of the given sizes from ``base``."""

    def __init__(self, sizes: Mapping[TopicPartition, Sequence[int]], base: int = 0) -> None:
        self.bounds: dict[TopicPartition, list[int]] = {}
        for tp, ss in sizes.items():
            b = [base]
            for s in ss:
                b.append(b[-1] + s)
            self.bounds[tp] = b
        self.calls: list[dict[TopicPartition, tuple[int, int]]] = []

    def latest(self, tp: TopicPartition) -> int:
        return self.bounds[tp][-1]

    def scan(self, windows: Windows) -> dict[TopicPartition, Scan]:
        self.calls.append(dict(windows))
        out = {}
        for tp, (lo, hi) in windows.items():
            b = self.bounds[tp]
            assert lo in b, "windows must start at a message boundary"
            assert hi <= b[-1], "windows never go past latest"
            inside = [x for x in b if lo <= x <= hi]
            last = inside[-1]
            i = b.index(last)
            nxt = None
            if i + 1 < len(b) and last + 4 <= hi:
                nxt = b[i + 1] - last
            out[tp] = Scan(tuple(inside), nxt)
        return out


# --- format -----------------------------------------------------------------------------------


def test_offset_dict_round_trip_and_canonical_order() -> None:
    offs = {("b", 1, 0): 5, ("a", 10, 2): 7, ("a", 2, 10): 9, ("a", 2, 3): 0}
    d = to_offset_dict(offs)
    assert d == {"a": {"2-3": 0, "2-10": 9, "10-2": 7}, "b": {"1-0": 5}}
    assert list(d) == ["a", "b"]
    assert list(d["a"]) == ["2-3", "2-10", "10-2"]  # numeric, not lexicographic
    assert from_offset_dict(json.loads(json.dumps(d))) == offs
    # the JSON is the same whatever order the input came in
    rev = dict(reversed(list(offs.items())))
    assert json.dumps(to_offset_dict(rev)) == json.dumps(d)


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"t": [1]},
        {"t": {"0": 1}},
        {"t": {"0-x": 1}},
        {"t": {"0-1": -1}},
        {"t": {"0-1": True}},
        {"t": {"0-1": "12"}},
        {"t": {"0-1": 1.5}},
    ],
)
def test_offset_dict_rejects_malformed(bad: object) -> None:
    with pytest.raises(OffsetFormatError):
        from_offset_dict(bad)


def test_parse_partition_key() -> None:
    assert parse_partition_key("12-3") == (12, 3)
    with pytest.raises(OffsetFormatError, match="brokerId-partition"):
        parse_partition_key("-1-3", topic="t")


def test_topology_keeps_vanished_and_adds_new_at_earliest() -> None:
    start = {A: 100, B: 200}
    change = diff_topology(start, [A, C])
    assert change.new == (C,)
    assert change.missing == (B,)
    merged = merge_topology(start, {C: 0, A: 5})
    assert merged == {A: 100, B: 200, C: 0}  # B kept, A not overwritten


def test_cap_to_target() -> None:
    assert cap_to_target({A: 10, B: 20}, None) == {A: 10, B: 20}
    assert cap_to_target({A: 10, B: 20, C: 5}, {A: 15, B: 12}) == {A: 10, B: 12}


# --- water filling ------------------------------------------------------------------------------


def test_water_fill_equal_and_redistributed() -> None:
    assert water_fill({A: 100, B: 100}, 100) == {A: 50, B: 50}
    assert water_fill({A: 10, B: 100, C: 100}, 100) == {A: 10, B: 45, C: 45}
    assert water_fill({A: 10, B: 20}, 100) == {A: 10, B: 20}
    assert water_fill({A: 0, B: 20}, 7) == {A: 0, B: 7}
    r = water_fill({A: 100, B: 100, C: 100}, 100)
    assert sorted(r.values()) == [33, 33, 34]


@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    st.integers(0, 40_000),
)
def test_water_fill_properties(demands: list[int], budget: int) -> None:
    d = {("t", 0, i): x for i, x in enumerate(demands)}
    r = water_fill(d, budget)
    assert sum(r.values()) == min(budget, sum(demands))
    assert all(0 <= r[tp] <= d[tp] for tp in d)
    # max-min fair: a partition below its demand gets at least what any other gets, minus 1
    for tp in d:
        if r[tp] < d[tp]:
            assert all(r[tp] >= r[o] - 1 for o in d)


# --- admission ----------------------------------------------------------------------------------


def positions(
    log: FakeLog, starts: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, int]]:
    return {tp: (s, log.latest(tp)) for tp, s in starts.items()}


def test_everything_fits_no_io() -> None:
    log = FakeLog({A: [10] * 5, B: [20] * 5})
    r = admit(positions(log, {A: 0, B: 0}), 1000, log.scan)
    assert r.ends == {A: 50, B: 100}
    assert log.calls == []
    assert r.scanned_bytes == 0


def test_nothing_pending() -> None:
    log = FakeLog({A: [10] * 5})
    r = admit(positions(log, {A: 50}), 10, log.scan)
    assert r.ends == {A: 50}
    assert log.calls == []


def test_cut_at_last_boundary_within_fair_share() -> None:
    log = FakeLog({A: [30] * 10, B: [30] * 10})
    r = admit(positions(log, {A: 0, B: 0}), 100, log.scan)
    # shares 50/50 -> one message each (30), leftover 40 -> one more for A (priority order)
    assert r.ends == {A: 60, B: 30}
    assert r.oversize is None
    # one scan round, windows start at the start offsets and go 4 bytes past the share
    assert log.calls == [{A: (0, 54), B: (0, 54)}]


def test_unused_share_goes_to_others() -> None:
    log = FakeLog({A: [10], B: [10] * 100})
    r = admit(positions(log, {A: 0, B: 0}), 500, log.scan)
    assert r.ends == {A: 10, B: 490}


def test_single_message_larger_than_limit_still_progresses() -> None:
    log = FakeLog({A: [1000, 10], B: [800]})
    r = admit(positions(log, {A: 0, B: 0}), 100, log.scan)
    assert r.oversize == A
    assert r.ends == {A: 1000, B: 0}
    # the next batch: A's small message and B's big one; B starved once -> priority
    ages = next_ages({}, positions(log, {A: 0, B: 0}), r.ends)
    assert ages == {B: 1}
    r2 = admit(positions(log, {A: 1000, B: 0}), 100, log.scan, ages=ages)
    assert r2.oversize == B
    assert r2.ends == {A: 1000, B: 800}


def test_segment_starts_shrink_the_scanned_window() -> None:
    sizes = [100] * 100  # segment starts every 1000 bytes
    log = FakeLog({A: sizes})
    r = admit(positions(log, {A: 0}), 4550, log.scan, segment_starts={A: [9000, 4000, 1000, 0]})
    assert r.ends == {A: 4500}
    assert log.calls == [{A: (4000, 4554)}]
    assert r.scanned_bytes == 554


def test_starved_partition_gets_priority() -> None:
    # A: messages of 60% of the budget; B: small messages, always plenty
    budget = 1000
    log = FakeLog({A: [600] * 20, B: [10] * 5000})
    starts = {A: 0, B: 0}
    ages: dict[TopicPartition, int] = {}
    a_progress = 0
    for _ in range(10):
        pos = positions(log, starts)
        r = admit(pos, budget, log.scan, ages=ages)
        assert sum(r.ends[tp] - starts[tp] for tp in starts) <= budget
        a_progress += r.ends[A] > starts[A]
        ages = next_ages(ages, pos, r.ends)
        starts = dict(r.ends)
    assert a_progress >= 4  # at least every other batch


def test_starved_head_reserved_counts_against_budget() -> None:
    log = FakeLog({A: [600] * 3, B: [10] * 500})
    r = admit(positions(log, {A: 0, B: 0}), 1000, log.scan, ages={A: 1})
    assert r.ends[A] == 600
    assert r.ends[B] == 400
    assert log.calls[0] == {A: (0, 4)}  # the starved head's size: a 4-byte look


def test_top_priority_oversize_goes_alone() -> None:
    log = FakeLog({A: [5000], B: [10] * 500})
    r = admit(positions(log, {A: 0, B: 0}), 1000, log.scan, ages={A: 3})
    assert r.oversize == A
    assert r.ends == {A: 5000, B: 0}


def test_missing_scan_answer_admits_nothing_there() -> None:
    log = FakeLog({A: [30] * 10, B: [30] * 10})

    def scan(w: Windows) -> dict[TopicPartition, Scan]:
        out = log.scan(w)
        out.pop(B, None)  # e.g. the broker went away between OFFSETS and FETCH
        return out

    r = admit(positions(log, {A: 0, B: 0}), 100, scan)
    assert r.ends[B] == 0
    assert r.ends[A] in (60, 90)


Case = tuple[FakeLog, dict[TopicPartition, int], int, dict[TopicPartition, int]]


@st.composite
def logs(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 5))
    sizes = {}
    starts = {}
    for i in range(n):
        tp = ("t", i % 2, i)
        ss = draw(st.lists(st.integers(10, 400), min_size=0, max_size=30))
        sizes[tp] = ss
    log = FakeLog(sizes, base=draw(st.sampled_from([0, 1 << 33])))
    for tp in sizes:
        b = log.bounds[tp]
        starts[tp] = b[draw(st.integers(0, len(b) - 1))]
    budget = draw(st.integers(0, 3000))
    ages = {tp: draw(st.integers(0, 3)) for tp in sizes}
    return log, starts, budget, ages


@settings(max_examples=300, deadline=None)
@given(logs())
def test_admission_invariants(case: Case) -> None:
    log, starts, budget, ages = case
    pos = positions(log, starts)
    r = admit(pos, budget, log.scan, ages=ages)
    assert set(r.ends) == set(starts)
    total = 0
    for tp, end in r.ends.items():
        assert starts[tp] <= end <= log.latest(tp)
        assert end in log.bounds[tp], "an end offset is always a message boundary"
        total += end - starts[tp]
    pending = sum(log.latest(tp) - starts[tp] for tp in starts)
    if pending:
        assert total > 0, "the stream always progresses"
    if total > budget:
        # only as one message larger than the whole budget
        moved = [tp for tp in starts if r.ends[tp] != starts[tp]]
        assert len(moved) == 1
        (tp,) = moved
        b = log.bounds[tp]
        assert b[b.index(starts[tp]) + 1] == r.ends[tp]
        assert r.oversize == tp
    # the driver never looks at more than budget + a header per partition (+ starved heads)
    assert r.scanned_bytes <= 2 * budget + 16 * len(starts)


@settings(max_examples=100, deadline=None)
@given(logs())
def test_admission_drains_every_partition(
    case: Case,
) -> None:
    log, starts, budget, _ = case
    ages: dict[TopicPartition, int] = {}
    cur = dict(starts)
    for _ in range(2000):
        pos = positions(log, cur)
        if all(s == lt for s, lt in pos.values()):
            break
        r = admit(pos, budget, log.scan, ages=ages)
        ages = next_ages(ages, pos, r.ends)
        assert max(ages.values(), default=0) <= len(cur) + 1, "no partition starves"
        cur = dict(r.ends)
    assert cur == {tp: log.latest(tp) for tp in cur}


def test_start_inside_a_message_is_detected() -> None:
    from kafka_pyspark.errors import InvalidMessageSizeError

    def scan(w: Windows) -> dict[TopicPartition, Scan]:
        # a "header" read inside a message announces a size past the log end
        return {tp: Scan((lo,), 1 << 20) for tp, (lo, _) in w.items()}

    with pytest.raises(InvalidMessageSizeError, match="not a message boundary"):
        admit({A: (5, 400)}, 100, scan)


# --- scan_window: hand-written 0.7 headers (magic 0: LENGTH | MAGIC | CRC32 | payload) ----------


def _magic0(payload: bytes) -> bytes:
    # LENGTH = 1 (magic) + 4 (crc) + payload; a header-only scan never checks the CRC
    return (5 + len(payload)).to_bytes(4, "big") + b"\x00" + b"\xde\xad\xbe\xef" + payload


def test_scan_window_boundaries_and_lookups() -> None:
    from kafka_pyspark._spark.stream.scan import scan_window

    third = _magic0(b"0123456789")  # 19 bytes, only its first 6 in the window
    data = _magic0(b"abc") + _magic0(b"hello") + third[:6]
    sc = scan_window(data, 1000)
    assert sc.boundaries.tolist() == [1000, 1012, 1026]
    assert sc.next_size == 19
    assert [sc.size_at(x) for x in (999, 1000, 1005, 1012, 1026, 1027)] == [
        None, 12, None, 14, 19, None
    ]
    assert [sc.last_at_or_before(x) for x in (999, 1000, 1011, 1012, 1025, 1026, 5000)] == [
        None, 1000, 1000, 1012, 1012, 1026, 1026
    ]
    # the next LENGTH field cut short: its size is unknown
    short = scan_window(data[:-3], 1000)
    assert short.boundaries.tolist() == [1000, 1012, 1026]
    assert short.next_size is None
    # a window inside the first message: only its start is a known boundary
    head = scan_window(data[:8], 1000)
    assert head.boundaries.tolist() == [1000]
    assert head.next_size == 12


# --- prefetch: answers from a scan of a larger window ---------------------------------------------


def _log_of(payload_sizes: Sequence[int]) -> bytes:
    return b"".join(_magic0(bytes(n)) for n in payload_sizes)


def test_restrict_is_exactly_scanning_the_smaller_window() -> None:
    """Every (boundary lo, hi) inside a scanned window: restrict() == scan_window() of the
    sub-window itself; a start that is not a boundary, or an end past the window: None."""
    from kafka_pyspark._spark.stream.prefetch import restrict
    from kafka_pyspark._spark.stream.scan import scan_window

    base = 5000
    data = _log_of([0, 3, 17, 1, 40, 2])[:-5]  # the last message cut short
    big = scan_window(data, base)
    top = base + len(data)
    starts = big.boundaries.tolist()
    for lo in starts:
        for hi in range(lo, top + 1):
            want = scan_window(data[lo - base : hi - base], lo)
            got = restrict((base, top, big), lo, hi)
            assert got is not None
            assert (got.boundaries.tolist(), got.next_size) == (
                want.boundaries.tolist(), want.next_size), (lo, hi)
        assert restrict((base, top, big), lo, top + 1) is None
    assert restrict((base, top, big), base + 1, base + 20) is None


def test_answer_from_only_while_the_log_holds_the_window() -> None:
    from kafka_pyspark._spark.read.log_bounds import LogBounds
    from kafka_pyspark._spark.stream.prefetch import answer_from
    from kafka_pyspark._spark.stream.scan import scan_window

    data = _log_of([10, 10, 10])  # messages of 19 bytes at 0, 19, 38; end 57
    scanned = {A: (0, 57, scan_window(data, 0))}
    windows = {A: (19, 42), B: (0, 4)}
    hits, misses = answer_from(scanned, windows, {A: LogBounds(0, 57), B: LogBounds(0, 9)})
    assert {tp: (s.boundaries.tolist(), s.next_size) for tp, s in hits.items()} == {
        A: ([19, 38], 19)
    }
    assert misses == {B: (0, 4)}
    # retention moved past the scanned window's start, or the log now ends before its end
    # (truncated, recreated): scan again
    for gone in (LogBounds(19, 57), LogBounds(0, 50)):
        hits, misses = answer_from(scanned, {A: (19, 42)}, {A: gone})
        assert (hits, misses) == ({}, {A: (19, 42)})


@pytest.mark.parametrize(
    ("sizes", "starts", "budget"),
    [
        ({A: [40] * 50, B: [40] * 50}, {A: 0, B: 0}, 1000),
        ({A: [40] * 50, B: [7, 300, 9] * 5, C: [1000]}, {A: 400, B: 316, C: 0}, 777),
        ({A: [40] * 10, B: [40] * 100}, {A: 0, B: 40}, 1000),  # A fits, B is cut
        ({A: [40] * 10}, {A: 0}, 1000),  # everything fits: no window
    ],
)
def test_predicted_windows_are_the_first_round(
    sizes: dict[TopicPartition, list[int]], starts: dict[TopicPartition, int], budget: int
) -> None:
    from kafka_pyspark._spark.stream.admission import predict_windows

    log = FakeLog(sizes)
    positions = {tp: (s, log.latest(tp)) for tp, s in starts.items()}
    admit(positions, budget, log.scan)
    assert predict_windows(positions, budget) == (log.calls[0] if log.calls else {})


# --- offset dicts made and parsed by a running stream --------------------------------------------

_OFFSETS = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c-d"]), st.integers(0, 3), st.integers(0, 20)),
    st.integers(0, 10**12), max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_OFFSETS, min_size=1, max_size=6), st.data())
def test_offset_dicts_equal_a_fresh_parse_and_make(seq: list[Offsets], data: Any) -> None:
    """Whatever was made before, ``make`` gives exactly what :func:`to_offset_dict` gives (the
    same JSON, so the same string Spark compares) and ``parse`` what :func:`from_offset_dict`
    does; offsets that share their broker-partitions with an earlier one included."""
    dicts = OffsetDicts(keep=3)
    for offsets in seq:
        if offsets and data.draw(st.booleans()):
            tp = data.draw(st.sampled_from(sorted(offsets)))
            offsets = {**offsets, tp: offsets[tp] + 1}
        made = dicts.make(offsets)
        assert json.dumps(made) == json.dumps(to_offset_dict(offsets))
        made["x"] = {}  # the caller's copy: nothing remembered changes
        assert dicts.parse(to_offset_dict(offsets)) == offsets
        assert dicts.parse(json.loads(json.dumps(to_offset_dict(offsets)))) == offsets


def test_offset_dicts_format_and_parse_only_what_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream over 10,000 broker-partitions of which 3 moved: the next offset formats 3 keys
    and parsing what it made parses none."""
    from kafka_pyspark._spark.stream import checkpoint as stream_checkpoint

    formatted: list[tuple[int, int]] = []
    from kafka_pyspark._shared.partition_key import partition_key as real

    def spy(broker: int, partition: int) -> str:
        formatted.append((broker, partition))
        return real(broker, partition)

    monkeypatch.setattr("kafka_pyspark._spark.stream.checkpoint.partition_key", spy)
    parsed: list[str] = []
    real_parse = stream_checkpoint.parse_partition_key

    def spy_parse(key: str, *, topic: str = "?") -> tuple[int, int]:
        parsed.append(key)
        return real_parse(key, topic=topic)

    monkeypatch.setattr(stream_checkpoint, "parse_partition_key", spy_parse)
    dicts = OffsetDicts()
    start: Offsets = {("t", b, p): 0 for b in range(4) for p in range(2500)}
    made = dicts.make(start)
    assert len(formatted) == 10_000
    formatted.clear()
    end = {**start, ("t", 0, 7): 5, ("t", 3, 2499): 9, ("t", 1, 0): 1}
    spark_copy = json.loads(json.dumps(dicts.make(end)))  # as Spark hands it back
    assert sorted(formatted) == [(0, 7), (1, 0), (3, 2499)]
    assert dicts.parse(spark_copy) == end and dicts.parse(made) == start
    assert parsed == []
    assert dicts.parse(to_offset_dict({("t", 0, 0): 1})) == {("t", 0, 0): 1}
    assert parsed == ["0-0"]
