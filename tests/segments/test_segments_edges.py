"""The edges of what ``option("path", ...)`` names: names outside the legal ranges fail the
planning naming the path; every file is read once however the paths overlap; one partition is
one log (one directory, one format), so (topic, broker, partition, offset, inner_index) stays
unique. Bytes come from tests/segment_builder.py and _bytes.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _bytes import message_set
from segment_builder import batch, record

from kafka_pyspark._options.segment_path import parse_segment_options
from kafka_pyspark._spark.read.segment_files import plan_segments, read_segment_partition
from kafka_pyspark.errors import SegmentPathError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1


def log_file(base: int, n: int) -> bytes:
    return batch(base, [record(i, f"v{base + i}".encode()) for i in range(n)])


def put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def read_paths(*paths: Path | str) -> list[tuple[Any, ...]]:
    """(topic, partition, offset, inner_index, value) of every row, in plan order."""
    opts = parse_segment_options({"paths": json.dumps([str(p) for p in paths])})
    rows: list[tuple[Any, ...]] = []
    for p in plan_segments(opts):
        for b in read_segment_partition(p):
            d = b.to_pydict()
            rows.extend(zip(d["topic"], d["partition"], d["offset"], d["inner_index"],
                            d["value"], strict=True))
    return rows


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A log directory: t-0 with two .log files, t-1 with one, u-0 with two .kafka files."""
    root = tmp_path / "logs"
    put(root / "t-0" / f"{0:020d}.log", log_file(0, 3))
    put(root / "t-0" / f"{3:020d}.log", log_file(3, 2))
    put(root / "t-1" / f"{0:020d}.log", log_file(0, 4))
    put(root / "u-0" / f"{0:020d}.kafka", message_set([b"a", b"bb"]))
    put(root / "u-0" / f"{23:020d}.kafka", message_set([b"ccc"]))
    return root


# --- names outside the legal ranges ----------------------------------------------------------


@pytest.mark.parametrize(
    ("layout", "path", "at_fault", "says"),
    [
        # partition ids are int32
        ({"t-2147483648/00000000000000000000.kafka": b"k"}, ".", "t-2147483648",
         "its partition 2147483648 is larger than 2147483647 (int32)"),
        ({"t-2147483648/00000000000000000000.kafka": b"k"}, "t-2147483648", "t-2147483648",
         "larger than 2147483647"),
        ({"t-2147483648/00000000000000000000.kafka": b"k"},
         "t-2147483648/00000000000000000000.kafka", "t-2147483648", "larger than 2147483647"),
        ({"t-99999999999999999999999/00000000000000000000.log": b"l"}, ".",
         "t-99999999999999999999999", "larger than 2147483647"),
        # base offsets are int64, not negative
        ({"t-0/99999999999999999999.kafka": b"k"}, ".", "t-0/99999999999999999999.kafka",
         "its base offset 99999999999999999999 is larger than 9223372036854775807 (int64)"),
        ({"t-0/99999999999999999999.log": b"l"}, "t-0", "t-0/99999999999999999999.log",
         "larger than 9223372036854775807"),
        ({"t-0/-0000000000000000001.log": b"l"}, "t-0/-0000000000000000001.log",
         "t-0/-0000000000000000001.log", "its base offset -0000000000000000001 is negative"),
        ({"t-0/00000000000000000000.log": b"l", "t-0/-1.log": b"l"}, ".", "t-0/-1.log",
         "is negative"),
        ({"t-0/+1.kafka": b"k"}, ".", "t-0/+1.kafka", "its base offset +1 has a sign"),
        # a .kafka file's rows are at name + position: they must fit in int64
        ({f"t-0/{INT64_MAX - 10:020d}.kafka": message_set([b"abcdef"])}, ".",
         f"t-0/{INT64_MAX - 10:020d}.kafka", "its offsets (base offset + size) pass"),
    ],
)
def test_names_outside_the_legal_ranges_fail_planning_naming_them(
    tmp_path: Path, layout: dict[str, bytes], path: str, at_fault: str, says: str
) -> None:
    for name, data in layout.items():
        put(tmp_path / "logs" / name, data)
    with pytest.raises(SegmentPathError) as info:
        parse = parse_segment_options({"path": str(tmp_path / "logs" / path)})
        plan_segments(parse)
    assert info.value.path == str(tmp_path / "logs" / at_fault)
    assert str(info.value).startswith(f"option 'path': {tmp_path / 'logs' / at_fault}: ")
    assert says in str(info.value)


def test_the_largest_legal_names_are_read(tmp_path: Path) -> None:
    put(tmp_path / "logs" / f"t-{INT32_MAX}" / f"{INT64_MAX - 1:020d}.log",
        log_file(INT64_MAX - 1, 1))
    put(tmp_path / "logs" / f"u-{INT32_MAX}" / f"{INT64_MAX - 100:020d}.kafka",
        message_set([b"a"]))  # 11 bytes: its rows' offsets fit
    assert read_paths(tmp_path / "logs") == [
        ("t", INT32_MAX, INT64_MAX - 1, 0, f"v{INT64_MAX - 1}".encode()),
        ("u", INT32_MAX, INT64_MAX - 100, 0, b"a"),
    ]


def test_files_that_are_not_segment_files_are_still_ignored(logs: Path) -> None:
    for name in ("t-0/x.log", "t-0/server.log", "t-0/1e5.log", "t-0/00000000000000000003.index",
                 "t-0/0x10.kafka", "backup-99999999999/readme.txt", "lost+found/a"):
        put(logs / name, b"junk")
    assert len(read_paths(logs)) == 3 + 2 + 4 + 3


# --- overlapping paths -----------------------------------------------------------------------


def test_every_file_is_read_once_however_the_paths_overlap(logs: Path, tmp_path: Path) -> None:
    once = read_paths(logs)
    assert len(once) == len(set(once)) == 12
    (tmp_path / "link").symlink_to(logs)
    for paths in (
        [logs, logs],
        [logs, logs / "t-0"],
        [logs / "t-0", logs],
        [logs / "t-0" / f"{3:020d}.log", logs / "t-0", logs],
        [logs, f"file://{logs}"],
        [logs, tmp_path / "link", tmp_path / "link" / "u-0" / f"{0:020d}.kafka"],
        [str(logs) + "/", logs / "t-0" / ".." / "t-1"],
    ):
        assert read_paths(*paths) == once, paths
    assert read_paths(logs / "t-0", logs / "t-0") == read_paths(logs / "t-0")


def test_one_partition_in_two_directories_is_an_error(logs: Path, tmp_path: Path) -> None:
    """Two brokers' copies of one partition: their rows would share keys."""
    other = tmp_path / "broker1"
    put(other / "t-0" / f"{5:020d}.log", log_file(5, 1))
    with pytest.raises(SegmentPathError) as info:
        read_paths(logs, other)
    assert info.value.path == str(logs / "t-0")
    assert f"partition 0 of topic t is also in {other / 't-0'}" in str(info.value)
    assert len(read_paths(logs / "t-1", other)) == 4 + 1  # different partitions: fine


# --- one format per partition ----------------------------------------------------------------


def test_a_partition_with_kafka_and_log_files_is_an_error_naming_both(logs: Path) -> None:
    put(logs / "u-0" / f"{40:020d}.log", log_file(40, 1))
    for path in (logs, logs / "u-0"):
        with pytest.raises(SegmentPathError) as info:
            read_paths(path)
        assert info.value.path == str(logs / "u-0")
        assert (f"holds both Kafka 0.7 and later segment files ({0:020d}.kafka and "
                f"{40:020d}.log)") in str(info.value)
    # one file of it, or another topic: no rows can collide
    assert read_paths(logs / "u-0" / f"{40:020d}.log") == [("u", 0, 40, 0, b"v40")]
    assert len(read_paths(logs / "t-0", logs / "t-1")) == 9
    assert len(parse_and_plan(logs, subscribe="t")) == 3


def parse_and_plan(path: Path, **options: str) -> list[Any]:
    return plan_segments(parse_segment_options({"path": str(path), **options}))


# --- through Spark ---------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_reads_overlapping_paths_once_and_fails_bad_names_when_planning(
    spark: SparkSession, logs: Path, tmp_path: Path
) -> None:
    from pyspark.errors import PySparkException

    def keys(df: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in df.select(
            "topic", "broker", "partition", "offset", "inner_index").collect())

    once = keys(spark.read.format("kafka07").load(str(logs)))
    assert len(once) == len(set(once)) == 12
    assert keys(spark.read.format("kafka07").load([str(logs), str(logs)])) == once
    assert keys(spark.read.format("kafka07").load([str(logs), str(logs / "t-0")])) == once

    put(logs / "t-2147483648" / f"{0:020d}.log", log_file(0, 1))
    df = spark.read.format("kafka07").load(str(logs))
    with pytest.raises(PySparkException) as info:
        df.collect()
    assert "SegmentPathError" in str(info.value)
    assert f"{logs / 't-2147483648'}: not a partition directory" in str(info.value)


def test_a_hard_link_is_the_file_it_links(logs: Path, tmp_path: Path) -> None:
    """Another name of one file (a hard link, as ``cp -al`` snapshots make) is read once."""
    snapshot = tmp_path / "snapshot" / "t-0"
    snapshot.mkdir(parents=True)
    for f in (logs / "t-0").iterdir():
        (snapshot / f.name).hardlink_to(f)
    assert read_paths(logs, snapshot.parent) == read_paths(logs)


def test_the_same_paths_on_two_filesystems_are_two_copies(tmp_path: Path) -> None:
    """Two stores of one kind (two S3 endpoints, two HDFS namenodes; here two in-memory
    filesystems of pyarrow) holding the same path hold two copies: both are found, and one
    partition in both is an error, not one copy read silently."""
    import pyarrow.fs as pafs

    from kafka_pyspark._segments.files import check_one_log, discover_opened

    stores = [pafs.FileSystem.from_uri("mock:///")[0] for _ in range(2)]
    for n, fs in enumerate(stores):
        fs.create_dir("logs/t-0")
        with fs.open_output_stream(f"logs/t-0/{0:020d}.log") as out:
            out.write(log_file(0, 1 + n))
    found = discover_opened((fs, "logs", f"mock://store{n}/logs") for n, fs in enumerate(stores))
    assert [(fs, f.size) for fs, f in found] == [
        (stores[0], len(log_file(0, 1))), (stores[1], len(log_file(0, 2)))]
    with pytest.raises(SegmentPathError, match="partition 0 of topic t is also in logs/t-0"):
        check_one_log(found)
    # the same store given twice: one copy
    assert len(discover_opened([(stores[0], "logs", "a"), (stores[0], "logs/t-0", "b")])) == 1
