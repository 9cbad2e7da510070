"""Reading segment files directly (kafka_pyspark._segments and the planning of _spark/
read/segment_files.py), in process: discovery, bounded chunked reads, torn tails, corruption,
splitting at entry boundaries, transactions, filters. Bytes come from tests/segment_builder.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from segment_builder import (
    GZIP,
    SNAPPY,
    ZSTD,
    batch,
    control_record,
    k07,
    message,
    name,
    record,
    v2_file,
    wrapper,
)

from kafka_pyspark._options.segment_path import parse_segment_options
from kafka_pyspark._segments.files import cut_points, discover, open_filesystem
from kafka_pyspark._segments.reading import ReadSettings, ReadStop, SegmentSplit, iter_split
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.planning import PlanFilter
from kafka_pyspark._spark.read.segment_files import (
    SegmentInputPartition,
    plan_segments,
    read_segment_partition,
)
from kafka_pyspark.errors import OptionError, SegmentFileError

LOCAL = pafs.LocalFileSystem()


def read_all(root: Path | str, **options: str) -> list[tuple[Any, ...]]:
    opts = parse_segment_options({"path": str(root), **options})
    rows: list[tuple[Any, ...]] = []
    for p in plan_segments(opts):
        for b in read_segment_partition(p):
            d = b.to_pydict()
            rows.extend(zip(d["topic"], d["partition"], d["offset"], d["value"], strict=True))
    return sorted(rows)


def test_log_directory_every_format(logdir: Path) -> None:
    rows = read_all(logdir)
    assert [r for r in rows if r[0] == "events" and r[1] == 0] == [
        ("events", 0, i, f"v{i}".encode()) for i in range(30)]
    assert [r for r in rows if r[0] == "old"] == [
        ("old", 0, 0, b"a"), ("old", 0, 11, b"bb"), ("old", 0, 23, b"ccc")]
    assert [r for r in rows if r[0] == "mixed"] == [
        ("mixed", 0, 0, b"m0"), ("mixed", 0, 1, b"m1"), ("mixed", 0, 2, b"m2"),
        ("mixed", 0, 3, b"m3")]
    assert len(rows) == 30 + 7 + 3 + 3 + 4


def test_partition_directory_single_file_and_file_uri(logdir: Path) -> None:
    assert read_all(logdir / "events-1") == [("events", 1, i, f"v{i}".encode())
                                             for i in range(7)]
    assert read_all(logdir / "events-0" / name(20)) == [
        ("events", 0, i, f"v{i}".encode()) for i in range(20, 30)]
    assert read_all(f"file://{logdir}") == read_all(logdir)
    fs, inner = open_filesystem(f"file://{logdir}/old-0")
    assert [f.base_offset for f in discover(fs, inner)] == [0, 23]


def test_discovery_errors_name_the_path(tmp_path: Path, logdir: Path) -> None:
    with pytest.raises(OptionError, match="does not exist"):
        read_all(tmp_path / "nope")
    with pytest.raises(OptionError, match="holds no segment files"):
        read_all(logdir / "not-a-partition")
    loose = tmp_path / "loose"
    loose.mkdir()
    (loose / name(0)).write_bytes(v2_file(0, 1))
    with pytest.raises(OptionError, match="not named topic-partition"):
        read_all(loose / name(0))
    with pytest.raises(OptionError, match="is not a segment file"):
        read_all(logdir / "meta.properties")


def test_subscribe_pattern_and_pushed_filters_narrow_the_plan(logdir: Path) -> None:
    def planned(pushed: PlanFilter | None = None, **options: str) -> list[TopicPartition]:
        opts = parse_segment_options({"path": str(logdir), **options})
        return [(p.split.file.topic, p.split.file.partition, p.split.file.base_offset)
                for p in plan_segments(opts, pushed)]

    assert len(planned()) == 7
    assert planned(subscribe="old") == [("old", 0, 0), ("old", 0, 23)]
    assert planned(subscribePattern="ev.*|mix.*") == [
        ("events", 0, 0), ("events", 0, 20), ("events", 1, 0), ("events", 2, 100),
        ("mixed", 0, 0)]
    assert planned(PlanFilter((("partition", "eq", 1),))) == [("events", 1, 0)]
    assert planned(PlanFilter((("broker", "eq", 3),))) == []
    assert planned(PlanFilter((("broker", "eq", 3),)), broker="3") != []
    # offsets: whole files outside the bounds are skipped (the end of a partition's last .log
    # file is not known from its name: it is kept)
    assert planned(PlanFilter(offset_low=20), subscribe="events") == [
        ("events", 0, 20), ("events", 1, 0), ("events", 2, 100)]
    assert planned(PlanFilter(offset_low=12, offset_high=23), subscribe="old") == [
        ("old", 0, 0)]
    assert planned(PlanFilter(offset_high=20), subscribe="events") == [
        ("events", 0, 0), ("events", 1, 0)]


def split_of(path: Path, start: int = 0, end: int | None = None) -> SegmentSplit:
    fs, inner = open_filesystem(str(path))
    f = discover(fs, inner)[0]
    return SegmentSplit(f, start, f.size if end is None else end)


def items(split: SegmentSplit, buffer_size: int = 8 << 20) -> tuple[list[Any], ReadStop]:
    out = list(iter_split(LOCAL, split, ReadSettings(buffer_size=buffer_size)))
    stop = out.pop()
    assert isinstance(stop, ReadStop)
    rows: list[Any] = []
    for b in out:
        assert not isinstance(b, ReadStop)  # one stop, last
        rows.extend(b.to_pylist())
    return rows, stop


@pytest.mark.parametrize("suffix", [".log", ".kafka"])
def test_tiny_read_buffer_gives_the_same_rows(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    big = b"B" * 5000
    data = (v2_file(0, 12) + batch(12, [record(0, big)]) + v2_file(13, 4, GZIP)
            + message(17, b"legacy", key=b"k") + wrapper(19, [message(0, b"a", magic=1),
                                                              message(1, big, magic=1)],
                                                         SNAPPY, magic=1)
            if suffix == ".log" else k07([b"x" * i for i in range(30)] + [big]))
    (d / name(0, suffix)).write_bytes(data)
    whole, stop = items(split_of(d / name(0, suffix)))
    assert stop == ReadStop("end", len(data))
    for size in (1, 61, 1000):
        assert items(split_of(d / name(0, suffix)), buffer_size=size) == (whole, stop)
    assert any(r["value"] == big for r in whole)


@pytest.mark.parametrize("suffix", [".log", ".kafka"])
def test_torn_tail_ends_the_file_cleanly(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    whole = v2_file(0, 10) if suffix == ".log" else k07([b"a", b"b", b"c"])
    torn = len(v2_file(0, 5)) if suffix == ".log" else len(k07([b"a", b"b"]))
    (d / name(0, suffix)).write_bytes(whole[:-3])
    rows, stop = items(split_of(d / name(0, suffix)), buffer_size=16)
    assert stop.kind == "torn-tail" and stop.position == torn
    assert len(rows) == (5 if suffix == ".log" else 2)


def corrupt_dir(tmp_path: Path, suffix: str) -> tuple[Path, int]:
    d = tmp_path / "bad-0"
    d.mkdir(exist_ok=True)
    if suffix == ".log":
        first = v2_file(0, 5)
        data = bytearray(first + v2_file(5, 5) + v2_file(10, 5))
    else:
        first = k07([b"one", b"two"])
        data = bytearray(first + k07([b"three", b"four"]))
    # the second entry's baseTimestamp (v2) / payload (0.7): a CRC mismatch
    data[len(first) + (30 if suffix == ".log" else 12)] ^= 0xFF
    (d / name(0, suffix)).write_bytes(bytes(data))
    return d / name(0, suffix), len(first)


@pytest.mark.parametrize("suffix", [".log", ".kafka"])
def test_corruption_in_the_middle(tmp_path: Path, suffix: str,
                                  caplog: pytest.LogCaptureFixture) -> None:
    path, at = corrupt_dir(tmp_path, suffix)
    rows, stop = items(split_of(path))
    assert stop.kind == "corrupt" and stop.position == at and "CRC" in (stop.error or "")
    assert len(rows) == (5 if suffix == ".log" else 2)
    part = plan_segments(parse_segment_options({"path": str(path)}))[0]
    with pytest.raises(SegmentFileError, match=rf"{path.name}, byte {at}: .*CRC.*failOnDataLoss"):
        list(read_segment_partition(part))
    lenient = plan_segments(parse_segment_options({"path": str(path),
                                                   "failOnDataLoss": "false"}))[0]
    with caplog.at_level(logging.WARNING):
        got = [r for b in read_segment_partition(lenient) for r in b.to_pylist()]
    assert len(got) == len(rows)
    assert f"byte {at}" in caplog.text and "skipping" in caplog.text


@pytest.mark.parametrize("suffix", [".log", ".kafka"])
def test_large_files_are_cut_at_entry_boundaries(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "big-0"
    d.mkdir()
    data = (v2_file(0, 400, per_batch=3) if suffix == ".log"
            else k07([f"message {i}".encode() * (i % 7 + 1) for i in range(400)]))
    path = d / name(0, suffix)
    path.write_bytes(data)
    fs, inner = open_filesystem(str(path))
    f = discover(fs, inner)[0]
    cuts = cut_points(fs, f, 2048)
    assert len(cuts) >= len(data) // 2048 - 1 and cuts == sorted(cuts)
    assert cut_points(fs, f, 2048, chunk=50) == cuts  # entries larger than the scan window
    whole, _ = items(SegmentSplit(f, 0, f.size))
    pieces: list[Any] = []
    for a, b in zip([0, *cuts], [*cuts, f.size], strict=True):
        rows, stop = items(SegmentSplit(f, a, b), buffer_size=500)
        assert stop == ReadStop("end", b)  # every cut is an entry boundary
        pieces.extend(rows)
    assert pieces == whole
    opts = parse_segment_options({"path": str(path), "maxPartitionBytes": str(1 << 20)})
    assert len(plan_segments(opts)) == 1
    assert cut_points(fs, f, len(data)) == []


def test_transactions_aborted_rows_are_dropped(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "tx-0"
    d.mkdir()

    def tx(base: int, pid: int, values: list[bytes]) -> bytes:
        return batch(base, [record(i, v) for i, v in enumerate(values)], transactional=True,
                     producer_id=pid, codec=GZIP)

    def marker(base: int, pid: int, commit: bool) -> bytes:
        return batch(base, [control_record(commit)], transactional=True, control=True,
                     producer_id=pid)

    first = (tx(0, 1, [b"c0", b"c1"]) + tx(2, 2, [b"a2"]) + batch(3, [record(0, b"p3")])
             + marker(4, 1, True) + tx(5, 1, [b"a5"]) + tx(6, 3, [b"open6"]))
    second = marker(7, 2, False) + tx(8, 1, [b"a8"]) + marker(9, 1, False)
    (d / name(0)).write_bytes(first)
    (d / name(7)).write_bytes(second)
    with caplog.at_level(logging.WARNING):
        rows = read_all(d)
    # a2 aborted by a marker in the next file, a5 and a8 by the abort at 9; open6 has no marker
    assert [r[3] for r in rows] == [b"c0", b"c1", b"p3", b"open6"]
    assert "producer id 3" in caplog.text and "no commit or abort marker" in caplog.text


def test_option_errors_name_the_options(logdir: Path) -> None:
    with pytest.raises(OptionError, match=r"option 'path': conflicts with zk\.connect"):
        parse_segment_options({"path": str(logdir), "zk.connect": "h:1"})
    with pytest.raises(OptionError, match=r"option 'path': conflicts with broker\.list"):
        parse_segment_options({"path": str(logdir), "broker.list": "0:h:1"})
    with pytest.raises(OptionError, match=r"'startingOffsets': has no meaning .* offset column"):
        parse_segment_options({"path": str(logdir), "startingoffsets": "earliest"})
    with pytest.raises(OptionError, match="'subscribePattern': conflicts with subscribe"):
        parse_segment_options({"path": "x", "subscribe": "a", "subscribePattern": "b"})
    with pytest.raises(OptionError, match="'bogus': unknown option"):
        parse_segment_options({"path": "x", "bogus": "1"})
    with pytest.raises(OptionError, match="'broker': must be an integer"):
        parse_segment_options({"path": "x", "broker": "one"})
    opts = parse_segment_options({"paths": '["a", "b"]', "broker": "4"})
    assert opts.paths == ("a", "b") and opts.broker == 4


def test_input_partitions_pickle(logdir: Path) -> None:
    import pickle

    parts = plan_segments(parse_segment_options({"path": str(logdir)}))
    back = pickle.loads(pickle.dumps(parts))
    assert all(isinstance(p, SegmentInputPartition) for p in back)
    assert [p.split for p in back] == [p.split for p in parts]


def test_cli_dump_reads_log_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kafka_pyspark.cli import main

    data = (message(0, b"old", key=b"k0")
            + batch(1, [record(0, None, key=b"k1", headers=[("h", b"x")]),
                        record(1, b"v2", timestamp_delta=5)], codec=ZSTD)
            + batch(3, [record(0, b"gone")], transactional=True, producer_id=9)
            + batch(4, [control_record(False)], transactional=True, control=True,
                    producer_id=9))
    path = tmp_path / name(0)
    path.write_bytes(data)
    assert main(["dump", str(path), "--json", "--values"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(d["offset"], d.get("value"), d["key"], d["compression"]) for d in lines[:-1]] == [
        (0, "old", "k0", "none"), (1, "", "k1", "zstd"), (2, "v2", None, "zstd")]
    assert lines[1]["headers"] == [["h", "x"]] and lines[1]["value_null"] is True
    assert lines[2]["timestamp"] == 1_700_000_000_005 and lines[2]["timestamp_type"] == 0
    assert lines[-1] == {"stop": "end", "offset": len(data), "error": None}
    bad = bytearray(data)
    at = len(message(0, b"old", key=b"k0"))
    bad[at + 30] ^= 1
    path.write_bytes(bytes(bad))
    assert main(["dump", str(path)]) == 1
    out = capsys.readouterr()
    assert out.out.startswith("offset=0 next=1 inner=0 codec=none size=3 key='k0'")
    assert f"corrupt at offset {at}: byte {at}: record batch CRC-32C mismatch" in out.err


def test_a_file_gone_after_planning_is_a_clear_error(logdir: Path) -> None:
    parts = plan_segments(parse_segment_options({"path": str(logdir / "events-1")}))
    (logdir / "events-1" / name(0)).unlink()
    with pytest.raises(SegmentFileError, match=r"events-1/0+\.log: cannot read"):
        list(read_segment_partition(parts[0]))


@pytest.mark.parametrize("suffix", [".log", ".kafka"])
def test_zero_bytes_at_the_end_are_a_torn_tail(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "z-0"
    d.mkdir()
    whole = v2_file(0, 10) if suffix == ".log" else k07([b"a", b"b", b"c"])
    (d / name(0, suffix)).write_bytes(whole + b"\0" * 5000)
    rows, stop = items(split_of(d / name(0, suffix)), buffer_size=1000)
    assert stop.kind == "torn-tail" and stop.position == len(whole) and "zero bytes" in (
        stop.error or "")
    assert len(rows) == (10 if suffix == ".log" else 3)
    (d / name(0, suffix)).write_bytes(whole + b"\0" * 5000 + b"\1")  # not only zeros: corrupt
    assert items(split_of(d / name(0, suffix)))[1].kind == "corrupt"
