"""The streaming reader: ``spark.readStream.format("kafka07")``.

Spark runs one long-lived Python worker per query on the driver that holds this reader and
calls ``initialOffset`` (fresh queries only), ``latestOffset(start, limit)``, ``partitions(start,
end)``, ``commit(end)`` and ``reportLatestOffset``; executors call ``read(partition)``.
Everything the reader decides is in the offsets (:mod:`.checkpoint` documents the
format) so that a restart from a checkpoint replays exactly the same ranges.

Policy and I/O are apart, as in Spark's ``KafkaMicroBatchStream`` and ``KafkaOffsetReader``:
this module decides (the micro-batch steps, ``Trigger.AvailableNow`` targets, data loss,
admission control for ``maxBytesPerTrigger`` with :mod:`.admission`, when to commit to the
group); :class:`~.offset_reader.StreamOffsetReader` does every round trip to the brokers
and ZooKeeper and keeps their connections and caches (registry view and ZooKeeper outages,
OFFSETS, boundary scans and their prefetch, group commits). Options
(:mod:`~kafka_pyspark._options`, mode ``stream``), discovery
(:mod:`~kafka_pyspark._spark.read.discovery`), start resolution
(:mod:`~kafka_pyspark._spark.read.start_end`), planning (:mod:`~kafka_pyspark._spark.read.planning`)
and the executor read path (:func:`~kafka_pyspark._spark.read.executor.read_partition`) are
the batch reader's own. ``docs/streaming.md`` is the user-facing description.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark._options import (
    ReadOptions,
    parse_read_options,
)
from kafka_pyspark._shared.partition_key import TopicPartition, describe_tp
from kafka_pyspark._spark import worker_gc
from kafka_pyspark._spark.compat import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)
from kafka_pyspark._spark.read.discovery import diff_topology, merge_topology
from kafka_pyspark._spark.read.executor import read_partition
from kafka_pyspark._spark.read.log_bounds import LogBounds
from kafka_pyspark._spark.read.planning import TaskSettings, plan_partitions
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark._spark.stream.admission import Admission, Limits, cap_to_target, next_ages
from kafka_pyspark._spark.stream.checkpoint import OffsetDicts, Offsets, to_offset_dict
from kafka_pyspark._spark.stream.offset_reader import StreamOffsetReader
from kafka_pyspark.client import OffsetRange
from kafka_pyspark.errors import SchemaError, data_loss_error, data_loss_skipped

__all__ = ["Kafka07StreamReader", "Memory"]

log = logging.getLogger(__name__)


class Memory:
    """What the policy remembers between Spark's calls; none of it decides which data a
    micro-batch holds (that is all in the offsets). Pickled as a fresh one."""

    def __init__(self) -> None:
        self.initial: dict[str, Any] | None = None  # a fresh query's initialOffset, if any
        self.target: Offsets | None = None  # Trigger.AvailableNow: the ends never passed
        self.ages: dict[TopicPartition, int] = {}  # starvation ages (fairness only)
        self.missing: set[TopicPartition] = set()  # vanished broker-partitions (warned once)
        self.admission: Admission | None = None  # the last admission control's result
        self.dicts = OffsetDicts()  # Spark's offset dicts, the last ones made remembered

    def __reduce__(self) -> tuple[type[Memory], tuple[()]]:
        return (type(self), ())


class Kafka07StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka07")`` (see the module docstring).

    The policy: ``options`` and ``task`` (immutable, all an executor's ``read`` needs),
    what the policy remembers between calls (:class:`Memory`) and the driver's
    :class:`~.offset_reader.StreamOffsetReader`, which does every round trip. Both of
    the latter pickle as fresh ones (an executor's copy carries no driver state)."""

    prefetch_scans = True
    """With ``maxBytesPerTrigger``, scan the next micro-batch's windows while this one runs
    (:mod:`.prefetch`); off only to measure or test the algorithm's own scans."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options: ReadOptions = parse_read_options(options, "stream")
        if schema != READ_SCHEMA:
            raise SchemaError(
                "kafka07 has a fixed read schema (topic, broker, partition, offset, "
                f"next_offset, inner_index, compression, value); do not pass .schema(): got "
                f"{schema.simpleString()}"
            )
        self.task = TaskSettings.of(self.options)
        self.offsets = StreamOffsetReader(self.options)
        self.memory = Memory()

    @property
    def last_admission(self) -> Admission | None:
        """What admission control decided in the last micro-batch (tests, debugging)."""
        return self.memory.admission

    # --- Spark API: offsets --------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """Where a fresh query starts (a query restarted from a checkpoint never calls this).

        ``startingOffsets`` (default ``latest``), ``earliest``, ``group`` (``group.id``'s
        committed offsets; partitions it never committed start at the earliest), JSON, or
        ``startingTimestamp``, resolved with the batch reader's rules. Subscribed topics that do
        not exist yet are picked up from their earliest offset when they appear.
        """
        tps, _ = self.offsets.view()
        starts, _ = self.offsets.starts(tps)
        initial = self.memory.initial = self.memory.dicts.make(starts)
        log.info("kafka07 stream: initial offsets %s", initial)
        return initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_bytes_per_trigger
        return ReadMaxBytes(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record the log ends now: an ``availableNow`` query never reads past them."""
        tps, _ = self.offsets.view()
        bounds = self.offsets.bounds(tps)
        target = self.memory.target = {tp: b.latest for tp, b in bounds.items()}
        log.info("kafka07 stream: Trigger.AvailableNow target %s", to_offset_dict(target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end offset of the next micro-batch (``start`` itself when there is nothing).

        0. ``commitToGroup``: the micro-batch ending at ``start`` is committed by Spark, so its
           end goes to the group now (:meth:`_commit_previous`).
        1. Topology: broker-partitions new in the registry enter the offset at their earliest
           offset (read from the next micro-batch on); ones that vanished keep their offset.
        2. OFFSETS per current broker-partition (latest, earliest, segment starts); a broker
           that does not answer keeps its offsets. Data loss is checked here.
        3. ``Trigger.AvailableNow``: ends capped at the recorded target.
        4. Admission control (``ReadMaxBytes``, :class:`~.admission.Limits`) chooses ends at
           message boundaries.
        """
        begin = self.memory.dicts.parse(start)
        self._commit_previous(start)
        tps, _ = self.offsets.view()
        change = diff_topology(begin, tps)
        target = self.memory.target
        # with an availableNow target, only broker-partitions it knows enter
        new = change.new if target is None else tuple(tp for tp in change.new if tp in target)
        entering = set(new)  # a set: a topic of thousands of partitions may appear at once
        bounds = self.offsets.bounds([tp for tp in tps if tp in begin or tp in entering])
        added = self._enter_new(new, bounds)
        self._note_missing(change.missing)
        positions, reset = self._positions(begin, bounds)
        limits = Limits.of(limit)
        chosen = self._choose_ends(positions, bounds, limits)
        ends: Offsets = merge_topology(begin, added)
        for tp, (s, _) in positions.items():
            # an offset skipped for data loss (s > begin) is kept even with nothing new
            ends[tp] = max(chosen.get(tp, s), s)
        ends.update(reset)
        self._prefetch_next(positions, ends, limits)
        return self.memory.dicts.make(ends)

    def _commit_previous(self, start: dict[str, Any]) -> None:
        """Step 0 of :meth:`latestOffset`: Spark asks for the offsets after ``start`` only once
        the micro-batch ending at ``start`` is committed; its ``commit()`` comes later, when
        the next one is planned, and never for the last one of an availableNow query. The
        initial offset of a fresh query is not a consumed position: never written."""
        if start != self.memory.initial:
            self.offsets.commit_group(start)

    def _enter_new(
        self, new: Sequence[TopicPartition], bounds: Mapping[TopicPartition, LogBounds]
    ) -> dict[TopicPartition, int]:
        """Step 1: new broker-partitions that answered OFFSETS, at their earliest offset."""
        added = {tp: bounds[tp].earliest for tp in new if tp in bounds}
        for tp, off in added.items():
            log.info("kafka07 stream: new broker-partition %s, from its earliest offset %d",
                     describe_tp(tp), off)
        return added

    def _note_missing(self, missing: Sequence[TopicPartition]) -> None:
        """Step 1: warn (once per change) about broker-partitions not in the registry now."""
        if missing and set(missing) != self.memory.missing:
            log.warning("kafka07 stream: not in the registry now, offsets kept until they "
                        "return: %s", ", ".join(describe_tp(tp) for tp in missing))
        self.memory.missing = set(missing)

    def _positions(
        self, begin: Offsets, bounds: Mapping[TopicPartition, LogBounds]
    ) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, int]]:
        """Steps 2-3: ``(start, latest)`` per broker-partition that answered OFFSETS (data
        loss checked, capped at the availableNow target), and the offsets reset because the
        log ends before the stream's position."""
        positions: dict[TopicPartition, tuple[int, int]] = {}
        reset: dict[TopicPartition, int] = {}
        for tp, s in begin.items():
            b = bounds.get(tp)
            if b is None:
                continue
            if s > b.latest:
                reset[tp] = self._data_loss(tp, s, b)
                continue
            if s < b.earliest:
                self._data_loss(tp, s, b)
                # executors skip [s, earliest) with a warning too (read_partition)
                positions[tp] = (b.earliest, b.latest)
            else:
                positions[tp] = (s, b.latest)
        target = self.memory.target
        if target is not None:
            capped = cap_to_target({tp: lt for tp, (_, lt) in positions.items()}, target)
            positions = {tp: (s, max(s, capped.get(tp, s))) for tp, (s, _) in positions.items()}
        return positions, reset

    def _choose_ends(
        self,
        positions: Mapping[TopicPartition, tuple[int, int]],
        bounds: Mapping[TopicPartition, LogBounds],
        limits: Limits | None,
    ) -> Mapping[TopicPartition, int]:
        """Step 4: every log end, or within ``limits`` what admission control admits."""
        if limits is None:
            return {tp: lt for tp, (_, lt) in positions.items()}
        memory = self.memory
        result = limits.admit(
            positions,
            self.offsets.scanner(bounds),
            segment_starts={tp: bounds[tp].segment_starts for tp in positions},
            ages=memory.ages,
        )
        memory.admission = result
        memory.ages = next_ages(memory.ages, positions, result.ends)
        if result.oversize is not None:
            tp = result.oversize
            log.info(
                "kafka07 stream: %s: the next message (%d bytes) is larger than "
                "maxBytesPerTrigger=%d; this micro-batch is that message alone",
                describe_tp(tp), result.ends[tp] - positions[tp][0], limits.max_bytes,
            )
        return result.ends

    def _data_loss(self, tp: TopicPartition, offset: int, b: LogBounds) -> int:
        """A start offset outside the log: fail, or warn and go to the earliest offset."""
        where = describe_tp(tp)
        if offset < b.earliest:
            what = (f"{where}: offsets [{offset}, {b.earliest}) are no longer on the broker "
                    f"(deleted by retention; earliest is now {b.earliest})")
        else:
            what = (f"{where}: the stream is at offset {offset}, past the log end {b.latest} "
                    "(the log was truncated or recreated): whatever the old log held after "
                    f"{offset} is lost")
        if self.options.fail_on_data_loss:
            raise data_loss_error(what, "skip to the earliest available offset")
        log.warning("kafka07 stream: %s", data_loss_skipped(
            what, f"continuing from the earliest offset {b.earliest}"))
        return b.earliest

    def _prefetch_next(
        self,
        positions: Mapping[TopicPartition, tuple[int, int]],
        ends: Mapping[TopicPartition, int],
        limits: Limits | None,
    ) -> None:
        """Within ``limits``, start scanning what the next micro-batch will scan if no data
        arrives meanwhile (:mod:`.prefetch`; only a guess, never trusted blindly)."""
        if limits is None or not self.prefetch_scans:
            return
        after = {tp: (ends[tp], lt) for tp, (_, lt) in positions.items() if tp in ends}
        self.offsets.prefetch(limits.first_windows(after))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The log ends seen by the last ``latestOffset`` (no extra I/O)."""
        latest = self.offsets.latest()
        return None if latest is None else self.memory.dicts.make(latest)

    # --- Spark API: planning and reading ---------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Ranges ``[start, end)`` per broker-partition: a pure function of the two offsets.

        A broker-partition only in ``end`` entered the stream in this micro-batch (at its
        earliest offset) and has nothing to read yet; one whose end is before its start was
        reset after data loss (``failOnDataLoss=false``) and has nothing to read either.
        """
        begin = self.memory.dicts.parse(start)
        stop = self.memory.dicts.parse(end)
        ranges = [
            OffsetRange(t, b, p, begin[(t, b, p)], e)
            for (t, b, p), e in sorted(stop.items())
            if (t, b, p) in begin and e > begin[(t, b, p)]
        ]
        if not ranges:
            return []
        return plan_partitions(
            ranges,
            self.offsets.addresses_for({r.broker for r in ranges}),
            self.options.fetch,
            self.task,
            segment_starts=self.offsets.segment_starts(),
            min_partitions=self.options.min_partitions,
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        worker_gc.settle()
        return read_partition(partition)

    # --- Spark API: commit and stop --------------------------------------------------------------

    def commit(self, end: dict[str, Any]) -> None:
        """After Spark committed a micro-batch: with ``commitToGroup=true``, write its end
        offsets to ``/consumers/[group.id]/offsets/[topic]/[brokerId]-[partition]`` (the
        decimal next byte offset, as 0.7's ZookeeperConsumerConnector does)."""
        self.offsets.commit_group(end)

    def stop(self) -> None:
        self.offsets.close()
