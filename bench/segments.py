"""Segment files read directly (``option("path", ...)``, docs/segments.md) against the Spark
ceiling and the codec limit, all measured in this run.

* ``segments.decode.<fmt>``: the pure decoder alone over the files' bytes (one core, 8 MiB
  chunks, CRC on): ``messages.decode_message_set`` for 0.7 ``.kafka`` files,
  ``formats.decode_log`` for v2 ``.log`` files; ``limit``: CRC (CRC-32 / CRC-32C) plus one copy
  of the same bytes, in rows/s.
* ``segments.inprocess.<fmt>``: the executor path alone (plan + read every piece, the source
  columns added), one core, no Spark.
* ``segments.spark.<fmt>``: ``spark.read.format("kafka07").load(dir).write.format("noop")``,
  ``ROWS`` rows of ``VALUE_SIZE`` bytes in ``PARTITIONS`` x ``FILES`` files; ``limit``:
  ``segments.spark.<fmt>.null``, a null Python data source yielding the very batches the
  reader yields (Arrow IPC files, memory-mapped) through the same Spark path; best of
  ``REPEAT`` interleaved runs. Also ``MB/s`` of file bytes.
* ``memory.segments.rss.2GiB``: peak RSS of a fresh process reading one 2 GiB ``.log`` file
  (``iter_split``, default 8 MiB read buffer), next to the same process's RSS before reading.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.results import Recorder, best_time, best_times
from bench.spark_sources import file_null_source, interleaved_times, spark_session

ROWS = 1_000_000
VALUE_SIZE = 200
PARTITIONS = 2
FILES = 2  # segment files per partition
SET_SIZE = 5000  # 0.7 messages per encoded set
BATCH_RECORDS = 1000  # v2 records per batch
REPEAT = 5  # interleaved Spark rounds: on a shared machine single runs vary by 50% and more
CHUNK = 8 << 20
RSS_FILE_BYTES = 2 << 30
T0 = 1_700_000_000_000


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def v2_batch(values: list[bytes]) -> bytes:
    """One uncompressed record batch (base offset 0: patch the first 8 bytes), null keys."""
    import crc32c

    records = b"".join(
        _zigzag(len(body)) + body
        for body in (b"\0" + _zigzag(0) + _zigzag(i) + _zigzag(-1) + _zigzag(len(v)) + v + b"\0"
                     for i, v in enumerate(values))
    )
    after = struct.pack(">hiqqqhii", 0, len(values) - 1, T0, T0, -1, -1, -1, len(values))
    after += records
    tail = struct.pack(">ibI", 0, 2, crc32c.crc32c(after)) + after
    return struct.pack(">qi", 0, len(tail)) + tail


def _values(n: int, seed: int) -> list[bytes]:
    base = bytes((seed * 31 + i) % 251 for i in range(VALUE_SIZE * 2))
    return [base[i % VALUE_SIZE : i % VALUE_SIZE + VALUE_SIZE] for i in range(n)]


def write_files(root: Path, fmt: str) -> int:
    """``ROWS`` rows in ``PARTITIONS`` x ``FILES`` files under ``root/<fmt>``; total bytes."""
    from kafka_pyspark._messages import encode_message_set

    per_file = ROWS // (PARTITIONS * FILES)
    total = 0
    for p in range(PARTITIONS):
        d = root / fmt / f"bench-{fmt}-{p}"
        d.mkdir(parents=True)
        offset = 0
        for _ in range(FILES):
            if fmt == "kafka07":
                unit, n = encode_message_set(_values(SET_SIZE, p)), SET_SIZE
                name, step = f"{offset:020d}.kafka", len(unit) * (per_file // n)
            else:
                unit, n = v2_batch(_values(BATCH_RECORDS, p)), BATCH_RECORDS
                name, step = f"{offset:020d}.log", per_file
            with open(d / name, "wb") as f:
                for k in range(per_file // n):
                    f.write(unit if fmt == "kafka07"
                            else struct.pack(">q", offset + k * n) + unit[8:])
            offset += step
            total += (d / name).stat().st_size
    return total


def decode_rows(rec: Recorder, root: Path, fmt: str) -> None:
    from kafka_pyspark._formats import decode_log
    from kafka_pyspark._messages import decode_message_set
    from kafka_pyspark._messages.crc import crc32

    path = sorted((root / fmt / f"bench-{fmt}-0").iterdir())[0]
    data = path.read_bytes()
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]

    def decode() -> int:
        rows, carry = 0, b""
        for c in chunks:
            buf = carry + c
            if fmt == "kafka07":
                r = decode_message_set(buf)
                rows, carry = rows + r.batch.num_rows, buf[r.bytes_consumed :]
            else:
                lr = decode_log(buf)
                rows, carry = rows + lr.batch.num_rows, buf[lr.bytes_consumed :]
        return rows

    def limit() -> None:
        import crc32c

        check = crc32 if fmt == "kafka07" else crc32c.crc32c
        for c in chunks:
            check(c)
            bytearray(c)

    rows = decode()
    best = best_times({"decode": decode, "limit": limit}, repeat=REPEAT)
    rec.record(f"segments.decode.{fmt}", rows / best["decode"], "rows/s",
               limit=rows / best["limit"],
               note=f"pure decoder over one file ({len(data) >> 20} MiB), CRC on; limit: CRC + "
                    "one copy of the same bytes")


def inprocess(root: Path, fmt: str, out: Path) -> tuple[float, int]:
    """Rows/s of the executor path alone; writes the batches it yields as the null source's
    input (one IPC file per planned piece)."""
    import pyarrow as pa

    from kafka_pyspark._options.segment_path import parse_segment_options
    from kafka_pyspark._spark.read.segment_files import plan_segments, read_segment_partition

    parts = plan_segments(parse_segment_options({"path": str(root / fmt)}))
    counted: list[int] = []

    def read_all() -> None:
        counted.append(sum(b.num_rows for p in parts for b in read_segment_partition(p)))

    best, rows = best_time(read_all, repeat=1), counted[-1]
    out.mkdir()
    for i, p in enumerate(parts):
        batches = list(read_segment_partition(p))
        with pa.OSFile(str(out / f"{i}.arrow"), "wb") as sink, pa.ipc.new_file(
            sink, batches[0].schema
        ) as writer:
            for b in batches:
                writer.write_batch(b)
    return rows / best, rows


def spark_rows(rec: Recorder, root: Path, nulls: dict[str, Path], sizes: dict[str, int]) -> None:
    from kafka_pyspark._spark.schema import SEGMENT_READ_SCHEMA

    spark = spark_session(
        "bench-segments", file_null_source("bench_null_segments", SEGMENT_READ_SCHEMA)
    )
    try:
        runs = {}
        for fmt in nulls:
            runs[f"null.{fmt}"] = ("bench_null_segments", {"dir": str(nulls[fmt])})
            runs[fmt] = ("kafka07", {"path": str(root / fmt)})
        spread = interleaved_times(spark, runs, REPEAT)
        best = {name: min(t) for name, t in spread.items()}
        for fmt in nulls:
            ceiling = ROWS / best[f"null.{fmt}"]
            rec.record(f"segments.spark.{fmt}.null", ceiling, "rows/s",
                       note="Spark ceiling: a null source yielding the reader's own batches")
            noise = max(spread[fmt]) / min(spread[fmt]) - 1
            paired = sorted(n / x for n, x in zip(spread[f"null.{fmt}"], spread[fmt],
                                                  strict=True))
            rec.record(f"segments.spark.{fmt}", ROWS / best[fmt], "rows/s", limit=ceiling,
                       target=">= 80% of the Spark ceiling",
                       note=f"load(dir) -> noop, {PARTITIONS * FILES} files; slowest run "
                            f"{noise:.0%} over the best; per-round ratio median "
                            f"{paired[len(paired) // 2]:.0%} ({paired[0]:.0%}..{paired[-1]:.0%})")
            rec.record(f"segments.spark.{fmt}.mbps", sizes[fmt] / best[fmt] / 1e6, "MB/s",
                       limit=sizes[fmt] / best[f"null.{fmt}"] / 1e6,
                       note="file bytes per second")
    finally:
        spark.stop()


_RSS_SCRIPT = """
import resource, sys
import pyarrow.fs as pafs
from kafka_pyspark._segments.files import discover
from kafka_pyspark._segments.reading import ReadSettings, SegmentSplit, iter_split
f = discover(pafs.LocalFileSystem(), sys.argv[1])[0]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rows = 0
for item in iter_split(pafs.LocalFileSystem(), SegmentSplit(f, 0, f.size), ReadSettings()):
    rows += getattr(item, "num_rows", 0)
print(rows, before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def rss_rows(rec: Recorder, root: Path) -> None:
    """One 2 GiB .log file of batches of 16 records of 8 KiB, read in a fresh process."""
    d = root / "rss" / "bench-rss-0"
    d.mkdir(parents=True)
    unit = v2_batch([bytes([i % 251]) * 8192 for i in range(16)])
    path = d / f"{0:020d}.log"
    copies = RSS_FILE_BYTES // len(unit) + 1
    with open(path, "wb") as f:
        for k in range(copies):
            f.write(struct.pack(">q", 16 * k) + unit[8:])
    try:
        out = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(path)], check=True,
                             capture_output=True, text=True).stdout.split()
        rows, before, after = int(out[0]), int(out[1]), int(out[2])
        if rows != 16 * copies:
            raise RuntimeError(f"rss read {rows} rows, expected {16 * copies}")
        rec.record("memory.segments.rss.2GiB", after / 1024, "MiB", limit=before / 1024,
                   note=f"peak RSS reading one {path.stat().st_size >> 20} MiB .log file "
                        f"({rows} rows); limit: the same process's peak before reading "
                        "(imports), so the ratio shows the growth")
    finally:
        shutil.rmtree(root / "rss", ignore_errors=True)


def run(rec: Recorder) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-segments-") as tmp:
        root = Path(tmp)
        sizes = {fmt: write_files(root, fmt) for fmt in ("kafka07", "log")}
        nulls: dict[str, Path] = {}
        for fmt in sizes:
            decode_rows(rec, root, fmt)
            rate, rows = inprocess(root, fmt, root / f"null-{fmt}")
            if rows != ROWS:
                raise RuntimeError(f"{fmt}: read {rows} rows, expected {ROWS}")
            rec.record(f"segments.inprocess.{fmt}", rate, "rows/s",
                       note="plan + read every piece, source columns added; one core, no Spark")
            nulls[fmt] = root / f"null-{fmt}"
        spark_rows(rec, root, nulls, sizes)
        rss_rows(rec, root)


if __name__ == "__main__":  # pragma: no cover
    from bench.__main__ import main

    sys.exit(main(["segments"]))
