"""``spark.read.format("kafka07").option("path", ...)``: segment files, no broker
(docs/segments.md).

Driver: options (:mod:`~kafka_pyspark._options.segment_path`), discovery of the files
(:func:`kafka_pyspark._segments.files.discover`), filters on ``topic``/``broker``/
``partition`` (exact) and ``offset`` (whole files skipped; a ``.log`` file with an offset index
is read from the last indexed entry at or below a pushed lower bound), then one input
partition per file, or per piece of a file larger than ``maxPartitionBytes`` (cut at entry
boundaries found by a header-only walk). Executors:
:func:`kafka_pyspark._segments.reading.iter_split`, Arrow batches of
:data:`ARROW_SEGMENT_SCHEMA`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import groupby, pairwise

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark._formats import LOG_SCHEMA
from kafka_pyspark._messages.columns import constant_column
from kafka_pyspark._options.segment_path import SegmentOptions, parse_segment_options
from kafka_pyspark._segments.files import (
    SegmentFile,
    check_one_log,
    cut_points,
    discover_paths,
)
from kafka_pyspark._segments.index import start_position
from kafka_pyspark._segments.reading import ReadSettings, ReadStop, SegmentSplit, iter_split
from kafka_pyspark._spark import worker_gc
from kafka_pyspark._spark.read import pushdown
from kafka_pyspark._spark.read.planning import PlanFilter
from kafka_pyspark._spark.schema import ARROW_READ_SCHEMA, SEGMENT_READ_SCHEMA
from kafka_pyspark.errors import SchemaError, SegmentFileError, data_loss_hint, data_loss_skipped

log = logging.getLogger(__name__)

ARROW_SEGMENT_SCHEMA = pa.schema([*list(ARROW_READ_SCHEMA)[:3], *LOG_SCHEMA])
"""The segment read schema (``schema.SEGMENT_READ_SCHEMA``) as Arrow types: the read schema's
source columns, then the later formats' columns (:data:`kafka_pyspark._formats.LOG_SCHEMA`).
Defined here, its one user, so that the live read path never imports ``_formats``."""


@dataclass(frozen=True)
class SegmentInputPartition(InputPartition):
    """One Spark task: one segment file, or one piece of a large one."""

    fs: pafs.FileSystem
    split: SegmentSplit
    broker: int
    settings: ReadSettings
    fail_on_data_loss: bool


def _offset_span(files: list[SegmentFile], i: int) -> tuple[int, int | None]:
    f = files[i]
    if f.kind == "kafka07":
        return f.base_offset, f.base_offset + f.size
    return f.base_offset, files[i + 1].base_offset if i + 1 < len(files) else None


def _wanted(pushed: PlanFilter | None, span: tuple[int, int | None]) -> bool:
    if pushed is None:
        return True
    low, high = span
    if pushed.offset_high is not None and low >= pushed.offset_high:
        return False
    return not (pushed.offset_low is not None and high is not None and high <= pushed.offset_low)


def _start(fs: pafs.FileSystem, f: SegmentFile, pushed: PlanFilter | None) -> int:
    """Where the rows of ``f`` that a pushed ``offset >= n`` wants begin (its offset index)."""
    if pushed is None or pushed.offset_low is None:
        return 0
    return start_position(fs, f, pushed.offset_low)


def plan_segments(
    options: SegmentOptions, pushed: PlanFilter | None = None
) -> list[SegmentInputPartition]:
    """Discover the files under every path (each file once) and plan one partition per file
    (or piece); a partition's files must form one log (:func:`check_one_log`)."""
    settings = ReadSettings(
        verify_crc=options.verify_checksums, max_decompressed_size=options.max_decompressed_size
    )
    sub = options.subscription
    found = [
        (fs, f) for fs, f in discover_paths(options.paths)
        if (sub is None or sub.allows(f.topic))
        and (pushed is None or pushed.accepts(f.topic, options.broker, f.partition))
    ]
    out: list[SegmentInputPartition] = []
    for _, group in groupby(found, key=lambda found: (found[1].topic, found[1].partition)):
        listed = list(group)
        check_one_log(listed)
        fs = listed[0][0]
        files = [f for _, f in listed]
        for i, f in enumerate(files):
            if not _wanted(pushed, _offset_span(files, i)):
                continue
            start = _start(fs, f, pushed)
            cuts = [c for c in cut_points(fs, f, options.max_partition_bytes) if c > start]
            bounds = [start, *cuts, f.size]
            later = tuple(files[i + 1 :]) if f.kind == "log" else ()
            for start, end in pairwise(bounds):
                split = SegmentSplit(f, start, end, later)
                out.append(SegmentInputPartition(fs, split, options.broker, settings,
                                                 options.fail_on_data_loss))
    return out


def with_segment_columns(
    batch: pa.RecordBatch, topic: str, broker: int, partition: int
) -> pa.RecordBatch:
    """A batch of ``formats.LOG_SCHEMA`` with topic, broker and partition in front."""
    n = batch.num_rows
    columns = [constant_column(topic, n), constant_column(broker, n),
               constant_column(partition, n), *batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SEGMENT_SCHEMA)


def read_segment_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The rows of one planned piece; a corrupt entry fails the task naming file and byte
    (``failOnDataLoss=true``) or ends the piece with a warning (``false``)."""
    if not isinstance(partition, SegmentInputPartition):
        return
    try:
        yield from _read(partition)
    except OSError as e:  # pyarrow's I/O errors are OSErrors
        raise SegmentFileError(partition.split.file.path, None, f"cannot read: {e}") from e


def _read(partition: SegmentInputPartition) -> Iterator[pa.RecordBatch]:
    split = partition.split
    f = split.file
    for item in iter_split(partition.fs, split, partition.settings):
        if not isinstance(item, ReadStop):
            yield with_segment_columns(item, f.topic, partition.broker, f.partition)
        elif item.kind == "corrupt":
            if partition.fail_on_data_loss:
                raise SegmentFileError(
                    f.path, item.position,
                    f"{item.error}. "
                    + data_loss_hint("skip the rest of this segment file instead"),
                ) from item.cause
            log.warning("kafka07: segment file %s, byte %d: %s", f.path, item.position,
                        data_loss_skipped(str(item.error),
                                          f"skipping bytes {item.position}..{split.end} of it"))
        elif item.kind == "torn-tail":
            log.warning("kafka07: segment file %s, byte %d: %s; the file ends there",
                        f.path, item.position, item.error)


class SegmentBatchReader(pushdown.FilteredReader):
    """The batch reader for ``path``: filters are pushed as for the live reader."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.segment_options = parse_segment_options(options)
        if schema != SEGMENT_READ_SCHEMA:
            raise SchemaError(
                "kafka07 with path has a fixed read schema (docs/segments.md); do not pass "
                f".schema(): got {schema.simpleString()}"
            )
        super().__init__()

    def partitions(self) -> list[InputPartition]:
        return list(plan_segments(self.segment_options, self.pushed.plan))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        worker_gc.settle()
        return read_segment_partition(partition)
