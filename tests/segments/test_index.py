"""A pushed ``offset >= n`` starts a ``.log`` file at its offset index's entry
(kafka_pyspark._segments.index), and only where the index matches the file. Index bytes are
written by hand: 8-byte entries ``int32 relative offset, int32 position`` (big-endian)."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from segment_builder import batch, record

from kafka_pyspark._options.segment_path import parse_segment_options
from kafka_pyspark._segments.files import discover
from kafka_pyspark._segments.index import start_position
from kafka_pyspark._spark.read.planning import PlanFilter
from kafka_pyspark._spark.read.segment_files import plan_segments, read_segment_partition

LOCAL = pafs.LocalFileSystem()
BASE = 100
BATCHES = [batch(BASE + 5 * k, [record(i, f"v{BASE + 5 * k + i}".encode()) for i in range(5)])
           for k in range(6)]  # offsets 100..129, five per batch
POS = [sum(len(b) for b in BATCHES[:k]) for k in range(6)]  # where each batch starts


def entry(relative: int, position: int) -> bytes:
    return struct.pack(">ii", relative, position)


# the largest offset of batches 1, 3 and 5 with their positions, then a preallocated zero tail
GOOD_INDEX = entry(9, POS[1]) + entry(19, POS[3]) + entry(29, POS[5]) + bytes(8 * 5)


def write(tmp_path: Path, index: bytes | None, log: bytes | None = None) -> Path:
    d = tmp_path / "logs" / "events-0"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{BASE:020d}.log").write_bytes(b"".join(BATCHES) if log is None else log)
    if index is not None:
        (d / f"{BASE:020d}.index").write_bytes(index)
    return d


def start(d: Path, low: int) -> int:
    return start_position(LOCAL, discover(LOCAL, str(d))[0], low)


@pytest.mark.parametrize(("low", "expected"), [
    (BASE + 12, POS[1]),  # entry (9, POS[1]): offsets 105.. start there
    (BASE + 19, POS[3]),
    (BASE + 25, POS[3]),
    (BASE + 1000, POS[5]),
    (BASE + 8, 0),  # no entry at or below: the start
    (BASE, 0),
    (BASE - 50, 0),
])
def test_index_entry_at_or_below_the_bound(tmp_path: Path, low: int, expected: int) -> None:
    assert start(write(tmp_path, GOOD_INDEX), low) == expected


def test_plan_starts_there_and_reads_the_rest(tmp_path: Path) -> None:
    d = write(tmp_path, GOOD_INDEX)
    opts = parse_segment_options({"path": str(d.parent)})
    parts = plan_segments(opts, PlanFilter(offset_low=BASE + 21))
    assert [(p.split.start, p.split.end) for p in parts] == [(POS[3], POS[5] + len(BATCHES[5]))]
    rows = [r for p in parts for b in read_segment_partition(p) for r in b.column("offset")
            .to_pylist()]
    assert rows == list(range(BASE + 15, BASE + 30))  # Spark's filter keeps offsets >= 121
    assert [p.split.start for p in plan_segments(opts)] == [0]  # no filter: the whole file


@pytest.mark.parametrize("index", [
    None,  # no index
    b"",  # empty index
    entry(9, POS[1] + 3) + entry(19, POS[3] + 3),  # positions inside batches
    entry(9, 1 << 30),  # past the end of the file
    entry(9, -5),  # negative position
    entry(1, POS[3]),  # claims offset 101 for the batch at POS[3], which starts at 115
    entry(9, POS[1])[:5],  # a torn entry
])
def test_an_index_that_does_not_match_reads_from_the_start(
    tmp_path: Path, index: bytes | None, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kafka_pyspark._segments.index"):
        assert start(write(tmp_path, index), BASE + 12) == 0


def test_a_damaged_entry_at_the_indexed_position_reads_from_the_start(tmp_path: Path) -> None:
    log = bytearray(b"".join(BATCHES))
    log[POS[3] + 70] ^= 0x01  # inside batch 3's records: its CRC-32C no longer matches
    assert start(write(tmp_path, GOOD_INDEX, bytes(log)), BASE + 25) == 0
    assert start(write(tmp_path, GOOD_INDEX, bytes(log)), BASE + 12) == POS[1]
