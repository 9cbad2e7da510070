"""The executor read path: what runs in a read task, for the batch and the streaming reader.

:func:`read_partition` (mode-agnostic: it knows nothing of batch or stream) opens one connection
to the partition's broker, fetches its ranges (FETCH, or MULTIFETCH for packed ranges), decodes
and yields ``pyarrow.RecordBatch`` es of exactly
:data:`~kafka_pyspark._spark.schema.ARROW_READ_SCHEMA`: consecutive fetch answers of one range
combined up to ``TaskSettings.batch_rows`` rows / ``batch_bytes`` bytes (Spark pays per
batch), an answer of a quarter of that or more passed as it is, so memory is bounded by those
and the fetch size, never by the topic. The driver side (what plans the partitions it reads)
is :mod:`.batch` and :mod:`kafka_pyspark._spark.stream.reader`.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from kafka_pyspark._messages import MESSAGE_SCHEMA
from kafka_pyspark._messages.columns import constant_column
from kafka_pyspark._messages.flat import ValueSink, join_views
from kafka_pyspark._shared.partition_key import describe_tp
from kafka_pyspark._spark.read.planning import Kafka07InputPartition
from kafka_pyspark._spark.schema import ARROW_READ_SCHEMA
from kafka_pyspark.client import OffsetRange
from kafka_pyspark.errors import OffsetOutOfRangeError, data_loss_error, data_loss_skipped

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection

__all__ = ["read_partition", "with_source_columns"]

log = logging.getLogger(__name__)


# the decoder's columns, in read-schema order, with the types the read schema wants
_DECODED = tuple((f.name, f.type) for f in list(ARROW_READ_SCHEMA)[3:])
_VALUE = MESSAGE_SCHEMA.get_field_index("value")


def with_source_columns(
    batch: pa.RecordBatch, topic: str, broker: int, partition: int
) -> pa.RecordBatch:
    """A decoded batch (``messages.MESSAGE_SCHEMA``) with ``topic``, ``broker`` and
    ``partition`` added in front: exactly :data:`ARROW_READ_SCHEMA`."""
    n = batch.num_rows
    columns = [constant_column(topic, n), constant_column(broker, n), constant_column(partition, n)]
    for name, kind in _DECODED:
        col = batch.column(name)
        if col.type != kind:
            col = col.cast(kind)
        columns.append(col)
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_READ_SCHEMA)


class _Coalescer:
    """Combines small consecutive decoded batches of one range into batches of up to ``rows``
    rows / ``nbytes`` bytes, then adds the source columns once per batch.

    Spark pays per batch (a 4k-row batch costs far more per row than a 64k-row one), so small
    answers are combined; a decoded batch of ``rows // 4`` rows or more (a large compressed
    fetch answer) goes to Spark as it is. The decoder writes the values of plain messages into
    :attr:`sink`, so the held batches' values are consecutive views of one buffer and join
    without a copy (the sink starts a fresh buffer once nothing is held).
    """

    __slots__ = ("broker", "held", "held_bytes", "held_rows", "key", "nbytes", "rows", "sink")

    def __init__(self, broker: int, rows: int, nbytes: int) -> None:
        self.broker = broker
        self.rows = rows
        self.nbytes = nbytes
        self.key: tuple[str, int] | None = None
        self.held: list[pa.RecordBatch] = []
        self.held_rows = 0
        self.held_bytes = 0
        self.sink = ValueSink(nbytes, rows)

    def add(self, topic: str, partition: int, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        if self.key != (topic, partition):
            out.extend(self.flush())
            self.key = (topic, partition)
        if batch.num_rows >= self.rows // 4:
            out.extend(self.flush())
            out.append(with_source_columns(batch, topic, self.broker, partition))
        else:
            self.held.append(batch)
            self.held_rows += batch.num_rows
            self.held_bytes += _nbytes(batch)
            if self.held_rows >= self.rows or self.held_bytes >= self.nbytes:
                out.extend(self.flush())
        if not self.held:
            self.sink.reset()
        return out

    def flush(self) -> list[pa.RecordBatch]:
        if not self.held or self.key is None:
            return []
        held, self.held = self.held, []
        self.held_rows = self.held_bytes = 0
        return [with_source_columns(_join(held), self.key[0], self.broker, self.key[1])]


def _join(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """The batches as one: their value columns without a copy where they are consecutive views
    of one buffer (:func:`~kafka_pyspark._messages.flat.join_views`)."""
    if len(batches) == 1:
        return batches[0]
    values = join_views([b.column(_VALUE) for b in batches])
    if values is None:
        return pa.concat_batches(batches)
    columns = [values if i == _VALUE else pa.concat_arrays([b.column(i) for b in batches])
               for i in range(len(MESSAGE_SCHEMA))]
    return pa.RecordBatch.from_arrays(columns, schema=MESSAGE_SCHEMA)


# What RecordBatch.nbytes counts for a decoded batch, from its string columns' offsets (Arrow's
# own builds an array of byte ranges per call, a visible share of an uncompressed read): the
# fixed-width columns' bytes, and per string column 4 bytes a row plus the bytes its rows span
# (and of its validity bitmap). The decoder's integer columns have no validity bitmap.
_FIXED_BYTES: int = sum(f.type.bit_width // 8 for f in MESSAGE_SCHEMA
                        if pa.types.is_integer(f.type))
_STRINGS = tuple(i for i, f in enumerate(MESSAGE_SCHEMA) if not pa.types.is_integer(f.type))
_INT32 = struct.Struct("<i")


def _nbytes(batch: pa.RecordBatch) -> int:
    n = batch.num_rows
    total: int = n * _FIXED_BYTES
    for i in _STRINGS:
        col = batch.column(i)
        bitmap, ends = col.buffers()[:2]
        first: int = _INT32.unpack_from(ends, 4 * col.offset)[0]
        last: int = _INT32.unpack_from(ends, 4 * (col.offset + n))[0]
        total += 4 * n + last - first
        if bitmap is not None:  # (a taken codec column has one, without nulls)
            total += (col.offset + n + 7) // 8 - col.offset // 8
    return total


def _connect(partition: Kafka07InputPartition) -> BrokerConnection:
    """The executor's connection. Its socket buffers hold at least one fetch answer
    (``fetch.size``): with 0.7's 64 KiB ``socket.buffersize`` a 1 MiB answer would cross
    loopback in sixteen sender/receiver hand-offs, each a wake-up and a copy, several times the
    system time of one that the broker can hand over at once."""
    from kafka_pyspark.client import BrokerConnection

    task = partition.task
    return BrokerConnection(
        partition.host,
        partition.port,
        timeout=task.socket_timeout_ms / 1000.0,
        buffer_size=max(task.socket_buffer_size, partition.fetch.fetch_size),
        broker_id=partition.broker,
    )


def read_partition(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Every message of the partition's ranges, as Arrow batches of the read schema.

    Mode-agnostic: the batch and the streaming reader both call it. A range never reads past
    its ``end`` (a message that starts before it is read whole, none at or after it). An
    OffsetOutOfRange answer (data deleted by retention while planned, or a log recreated) is a
    :class:`DataLossError` naming topic, broker, partition and offsets, or, with
    ``failOnDataLoss=false``, a warning naming what was skipped and a jump to the earliest
    offset. Anything that is not a :class:`Kafka07InputPartition` (Spark's placeholder for an
    empty plan) reads nothing.
    """
    if not isinstance(partition, Kafka07InputPartition) or not partition.ranges:
        return
    conn = _connect(partition)
    try:
        yield from _read_ranges(conn, partition)
    finally:
        conn.close()


def _read_ranges(
    conn: BrokerConnection, partition: Kafka07InputPartition
) -> Iterator[pa.RecordBatch]:
    from kafka_pyspark.client import iter_multi_range

    out = _Coalescer(partition.broker, partition.task.batch_rows, partition.task.batch_bytes)
    pending = [r for r in partition.ranges if r.size > 0]
    while pending:
        reached = [r.start for r in pending]  # each range's next offset to read
        try:
            for i, result in iter_multi_range(conn, pending, partition.fetch, sink=out.sink):
                reached[i] = result.next_offset
                if result.batch.num_rows:
                    yield from out.add(pending[i].topic, pending[i].partition, result.batch)
            break
        except OffsetOutOfRangeError as e:
            rest = [replace(r, start=at) for r, at in zip(pending, reached, strict=True)]
            pending = _recover(conn, partition, rest, e)
    yield from out.flush()


def _recover(
    conn: BrokerConnection,
    partition: Kafka07InputPartition,
    pending: list[OffsetRange],
    error: OffsetOutOfRangeError,
) -> list[OffsetRange]:
    """After OffsetOutOfRange: the unfinished rest of each range (``pending``: from where it
    stopped) moved to the log's bounds (or fail)."""
    from kafka_pyspark.client import earliest, latest

    moved = False
    out: list[OffsetRange] = []
    for r in pending:
        if r.start >= r.end:
            continue
        first = earliest(conn, r.topic, r.partition)
        last = latest(conn, r.topic, r.partition)
        where = describe_tp(r.key)
        if first <= r.start <= last:
            out.append(r)
            continue
        moved = True
        if r.start < first:
            lost_to = min(first, r.end)
            what = (
                f"{where}: offsets [{r.start}, {lost_to}) are no longer on the broker "
                f"(deleted by retention; earliest is now {first})"
            )
        else:
            lost_to = r.end
            what = (
                f"{where}: offsets [{r.start}, {r.end}) are past the log end {last} "
                "(the log was truncated or recreated)"
            )
        if partition.task.fail_on_data_loss:
            raise data_loss_error(what, "skip lost data instead") from error
        log.warning("kafka07: %s", data_loss_skipped(what, "skipping them"))
        if lost_to < r.end:
            out.append(replace(r, start=lost_to))
    if not moved:
        raise error
    return out
