"""Segment-file storage (kafka_pyspark.testing._log): layout, rolling, reads, recovery, OFFSETS.

Pure file I/O; the socket-level versions are in test_broker_storage.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _broker_raw import THREE
from _bytes import message

from kafka_pyspark.errors import OffsetOutOfRangeError
from kafka_pyspark.testing._log import (
    LogStorageError,
    LogStore,
    PartitionLog,
    parse_partition_dir_name,
    parse_segment_file_name,
    segment_file_name,
    valid_prefix,
)

M = THREE[:17]  # one 17-byte message


class Clock:
    def __init__(self, now: float = 10_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def read_bytes(plog: PartitionLog, offset: int, max_size: int) -> bytes:
    piece = plog.read(offset, max_size)
    return b"" if piece is None else piece.read()


def test_names() -> None:
    assert segment_file_name(0) == "00000000000000000000.kafka"
    assert segment_file_name(536890406) == "00000000000536890406.kafka"
    assert parse_segment_file_name("00000000001073761356.kafka") == 1073761356
    assert parse_segment_file_name("00000000000000000000.log") is None
    assert parse_segment_file_name("x.kafka") is None
    assert parse_partition_dir_name("dogs-0") == ("dogs", 0)
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir_name("dogs") is None
    assert parse_partition_dir_name("dogs-x") is None
    assert parse_partition_dir_name("-3") is None


def test_new_log_has_an_empty_first_segment(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=1000)
    assert [s.path.name for s in plog.segments()] == ["00000000000000000000.kafka"]
    assert (tmp_path / "t-0" / "00000000000000000000.kafka").stat().st_size == 0
    assert (plog.topic, plog.partition, plog.end) == ("t", 0, 0)
    assert plog.read(0, 100) is None
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(1, 100)
    plog.close()


def test_append_read_and_bounds(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=1000)
    assert plog.append(THREE, 3) == 0
    assert plog.append(M, 1) == 51
    assert plog.end == 68
    assert read_bytes(plog, 0, 1000) == THREE + M
    assert read_bytes(plog, 5, 3) == THREE[5:8]
    assert read_bytes(plog, 60, 0) == b""
    assert plog.read(68, 10) is None
    for bad in (-1, 69):
        with pytest.raises(OffsetOutOfRangeError):
            plog.read(bad, 10)
    plog.close()
    assert (tmp_path / "t-0" / segment_file_name(0)).read_bytes() == THREE + M


def test_roll_when_segment_is_over_the_limit(tmp_path: Path) -> None:
    # 0.7.2 maybeRoll: roll before an append when the current size is *over* the limit
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=34)
    for i in range(5):
        plog.append(M, 1)
        assert plog.end == 17 * (i + 1)
    # sizes before each append: 0, 17, 34 (== limit: no roll), 51 (> limit: roll at 51), 17
    assert [(s.start, s.size) for s in plog.segments()] == [(0, 51), (51, 34)]
    plog.append(M, 1)  # 34: no roll
    plog.append(M, 1)  # 51 > 34: roll at 102
    assert [(s.start, s.size) for s in plog.segments()] == [(0, 51), (51, 51), (102, 17)]
    assert [p.name for p in sorted((tmp_path / "t-0").iterdir())] == [
        segment_file_name(0),
        segment_file_name(51),
        segment_file_name(102),
    ]
    # a read never crosses a segment boundary
    assert read_bytes(plog, 0, 1000) == M * 3
    assert read_bytes(plog, 34, 1000) == M
    assert read_bytes(plog, 51, 1000) == M * 3
    assert read_bytes(plog, 102, 1000) == M
    assert plog.read(119, 1000) is None
    plog.close()


def test_big_message_set_is_never_split(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=10)
    plog.append(THREE, 3)
    plog.append(THREE, 3)
    assert [(s.start, s.size) for s in plog.segments()] == [(0, 51), (51, 51)]
    plog.close()


def test_flush_interval_hides_unflushed_bytes(tmp_path: Path) -> None:
    clock = Clock()
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=1000, flush_interval=4, clock=clock)
    plog.append(THREE, 3)
    assert (plog.end, plog.written_end) == (0, 51)
    assert plog.read(0, 100) is None
    assert plog.offsets_before(-1, 10) == [0]
    plog.flush_if_older(5.0)  # last flush is "now": not yet
    assert plog.end == 0
    clock.now += 5.0
    plog.flush_if_older(5.0)
    assert plog.end == 51
    plog.append(M, 1)
    plog.append(M, 1)
    plog.append(M, 1)
    assert plog.end == 51
    plog.append(M, 1)  # 4 unflushed messages: flushed
    assert plog.end == 51 + 68
    plog.close()


def test_roll_flushes_the_old_segment(tmp_path: Path) -> None:
    plog = PartitionLog(
        tmp_path / "t-0", max_segment_size=40, flush_interval=100, clock=Clock()
    )
    plog.append(THREE, 3)
    assert plog.end == 0
    plog.append(M, 1)  # 51 > 40: roll (flushing the first segment), then append unflushed
    assert plog.end == 51
    assert [(s.start, s.size) for s in plog.segments()] == [(0, 51), (51, 17)]
    assert plog.offsets_before(-1, 10) == [51, 0]
    plog.close()


def test_close_flushes(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=1000, flush_interval=100)
    plog.append(THREE, 3)
    plog.close()
    again = PartitionLog(tmp_path / "t-0", max_segment_size=1000)
    assert again.end == 51
    again.close()


def test_offsets_before_uses_segment_mtimes(tmp_path: Path) -> None:
    clock = Clock(now=10_000.0)
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=30, clock=clock)
    for _ in range(4):
        plog.append(M * 2, 2)  # segments of 34 bytes: 0, 34, 68, 102
    segs = plog.segments()
    assert [s.start for s in segs] == [0, 34, 68, 102]
    for seg, t in zip(segs, (1000, 2000, 3000, 4000), strict=True):
        os.utime(seg.path, (t, t))
    # entries: (0, 1e6) (34, 2e6) (68, 3e6) (102, 4e6) (136 = end, now = 1e7)
    assert plog.offsets_before(-1, 100) == [136, 102, 68, 34, 0]
    assert plog.offsets_before(-1, 2) == [136, 102]
    assert plog.offsets_before(-2, 100) == [0]
    assert plog.offsets_before(-2, 0) == []
    assert plog.offsets_before(999_999, 100) == []
    assert plog.offsets_before(1_000_000, 100) == [0]  # mtime <= TIME counts (0.7.2 code)
    assert plog.offsets_before(2_500_000, 100) == [34, 0]
    assert plog.offsets_before(4_000_000, 100) == [102, 68, 34, 0]
    assert plog.offsets_before(4_000_000, 1) == [102]
    assert plog.offsets_before(9_999_999, 100) == [102, 68, 34, 0]
    assert plog.offsets_before(10_000_000, 100) == [136, 102, 68, 34, 0]
    with pytest.raises(ValueError):
        plog.offsets_before(-1, -1)
    plog.close()


def test_offsets_latest_with_empty_last_segment(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=10)
    plog.append(THREE, 3)
    plog.append(b"", 0)  # 51 > 10: rolls even for an empty set (0.7.2 maybeRoll comes first)
    assert [(s.start, s.size) for s in plog.segments()] == [(0, 51), (51, 0)]
    # no end entry when the last segment is empty
    assert plog.offsets_before(-1, 10) == [51, 0]
    plog.close()


# --- recovery ------------------------------------------------------------------------------


def test_valid_prefix() -> None:
    data = THREE + message(b"m0", magic=0)
    assert valid_prefix(data) == len(data)
    assert valid_prefix(data[:-1]) == 51
    assert valid_prefix(THREE[:16]) == 0
    assert valid_prefix(THREE + b"\x00\x00\x00") == 51
    assert valid_prefix(THREE + b"\x00\x00\x00\x00" + b"x" * 10) == 51  # length 0 < minimum
    assert valid_prefix(THREE + b"\xff\xff\xff\xff") == 51  # negative length
    corrupt = bytearray(THREE)
    corrupt[17 + 12] ^= 0x40  # a payload byte of the second message
    assert valid_prefix(bytes(corrupt)) == 17
    magic2 = bytearray(THREE)
    magic2[34 + 4] = 2
    assert valid_prefix(bytes(magic2)) == 34
    assert valid_prefix(b"") == 0


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (b"", 51),
        (b"\x00\x00", 51),  # torn length field
        (M[:10], 51),  # torn message
        (b"\x00\x00\x00\x0d" + b"\x00" * 13, 51),  # "nonsense block": zeros with a length
        (M, 68),
    ],
)
def test_recovery_truncates_torn_or_corrupt_tail(tmp_path: Path, tail: bytes, kept: int) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=1000)
    plog.append(THREE, 3)
    plog.close()
    seg = tmp_path / "t-0" / segment_file_name(0)
    with open(seg, "ab") as f:
        f.write(tail)
    again = PartitionLog(tmp_path / "t-0", max_segment_size=1000)
    assert again.end == kept
    assert seg.stat().st_size == kept
    assert again.recovered_bytes == 51 + len(tail) - kept
    assert again.append(M, 1) == kept  # appends continue at the recovered end
    again.close()


def test_recovery_only_touches_the_last_segment(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0", max_segment_size=10)
    plog.append(THREE, 3)
    plog.append(M, 1)
    plog.close()
    last = tmp_path / "t-0" / segment_file_name(51)
    with open(last, "r+b") as f:
        f.seek(12)
        f.write(b"?")  # corrupt the only message of the last segment
    again = PartitionLog(tmp_path / "t-0", max_segment_size=10)
    assert [(s.start, s.size) for s in again.segments()] == [(0, 51), (51, 0)]
    assert again.end == 51
    again.close()


def test_segments_that_do_not_line_up_fail_to_open(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    (d / segment_file_name(0)).write_bytes(THREE)
    (d / segment_file_name(60)).write_bytes(M)
    with pytest.raises(LogStorageError, match="do not line up"):
        PartitionLog(d, max_segment_size=1000)


def test_log_store_loads_existing_dirs(tmp_path: Path) -> None:
    store = LogStore(tmp_path, max_segment_size=1000)
    log_a, new = store.get_or_create("a-b", 3)
    assert new
    log_a.append(THREE, 3)
    _, new = store.get_or_create("a-b", 0)
    assert not new
    store.close()
    (tmp_path / "stray-file").write_text("x")
    (tmp_path / ".kafka_cleanshutdown").write_text("")  # a real 0.7.2 broker's marker
    (tmp_path / "not_a_partition").mkdir()
    again = LogStore(tmp_path, max_segment_size=1000)
    assert again.topics() == ["a-b"]
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    plog = again.get("a-b", 3)
    assert plog is not None and plog.end == 51
    assert again.get("a-b", 1) is None
    again.close()
