"""The streaming reader: ``spark.readStream.format("kafka07")``.

Spark runs one long-lived Python worker per query on the driver that holds this reader and
calls ``initialOffset`` (fresh queries only), ``latestOffset(start, limit)``, ``partitions(start,
end)``, ``commit(end)`` and ``reportLatestOffset``; executors call ``read(partition)``.
Everything the reader decides is in the offsets (:mod:`.stream_checkpoint` documents the
format) so that a restart from a checkpoint replays exactly the same ranges.

Built on the batch reader: options (:mod:`.options`, mode ``stream``), discovery
(:mod:`.discovery`), OFFSETS lookups (:mod:`.log_bounds`), start resolution
(:mod:`.start_end`), planning (:mod:`.planning`) and the executor read path
(:func:`.reader.read_partition`) are the batch reader's own. Stream-only: this module (the
micro-batch steps, ``Trigger.AvailableNow`` targets), topology changes (:mod:`.discovery`),
admission control for ``maxBytesPerTrigger`` (:mod:`.admission`), committing to a 0.7 consumer
group (:mod:`.stream_group`) and ZooKeeper outages (:mod:`.stream_outage`).
``docs/streaming.md`` is the user-facing description.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark.errors import (
    BrokerConnectionError,
    KafkaError,
    RegistryUnavailableError,
    SchemaError,
    data_loss_error,
    data_loss_skipped,
)
from kafka_pyspark.names import TopicPartition, describe_tp
from kafka_pyspark.spark import worker_gc
from kafka_pyspark.spark.admission import (
    Scan,
    Windows,
    admit,
    cap_to_target,
    next_ages,
)
from kafka_pyspark.spark.compat import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)
from kafka_pyspark.spark.discovery import (
    current_view,
    diff_topology,
    group_start,
    merge_topology,
)
from kafka_pyspark.spark.log_bounds import LogBounds, OffsetLookup
from kafka_pyspark.spark.options import (
    ReadOptions,
    parse_read_options,
)
from kafka_pyspark.spark.planning import OffsetRange, fetch_settings, plan_partitions
from kafka_pyspark.spark.reader import read_partition
from kafka_pyspark.spark.schema import READ_SCHEMA
from kafka_pyspark.spark.start_end import resolve_starts
from kafka_pyspark.spark.stream_checkpoint import OffsetDicts, Offsets, to_offset_dict
from kafka_pyspark.spark.stream_group import GroupCommitter
from kafka_pyspark.spark.stream_outage import ZooKeeperOutage
from kafka_pyspark.spark.stream_prefetch import (
    Prefetch,
    Scanned,
    answer_from,
    predict_windows,
    scan_windows,
)

if TYPE_CHECKING:
    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.cluster_options import BrokerAddress

__all__ = ["Kafka07StreamReader"]

log = logging.getLogger(__name__)


class Kafka07StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kafka07")`` (see the module docstring)."""

    prefetch_scans = True
    """With ``maxBytesPerTrigger``, scan the next micro-batch's windows while this one runs
    (:mod:`.stream_prefetch`); off only to measure or test the algorithm's own scans."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options: ReadOptions = parse_read_options(options, "stream")
        if schema != READ_SCHEMA:
            raise SchemaError(
                "kafka07 has a fixed read schema (topic, broker, partition, offset, "
                f"next_offset, inner_index, compression, value); do not pass .schema(): got "
                f"{schema.simpleString()}"
            )
        self.settings = fetch_settings(self.options)
        # driver-side state, never pickled (see __getstate__); none of it decides which data
        # a micro-batch holds: that is all in the offsets
        self._cluster: Cluster | None = None
        self._latest: Offsets | None = None  # last seen log ends (reportLatestOffset)
        self._bounds: dict[TopicPartition, LogBounds] = {}  # last OFFSETS answers
        self._addresses: dict[int, tuple[str, int]] = {}  # last known broker addresses
        self._target: Offsets | None = None  # Trigger.AvailableNow
        self._ages: dict[TopicPartition, int] = {}  # starvation ages (fairness only)
        self.last_admission: Any = None  # for tests and debugging
        self._initial: dict[str, Any] | None = None  # what initialOffset returned
        self._missing: set[TopicPartition] = set()  # vanished broker-partitions (logged)
        # ZooKeeper outages: the last registry view; group commits (they wait out outages)
        self._outage = ZooKeeperOutage(
            self.options.cluster.zk_connect or "", self.options.zk_outage_max_ms
        )
        self._known: tuple[list[TopicPartition], dict[int, Any]] | None = None
        self._group = (
            GroupCommitter(self.options.group_id, self._outage)
            if self.options.commit_to_group else None
        )
        # maxBytesPerTrigger: the next micro-batch's boundary scans, fetched while this one
        # runs (:mod:`.stream_prefetch`), and what the last one found
        self._prefetch = Prefetch(self.options.cluster)
        self._scanned: Scanned = {}
        self._offsets: OffsetLookup | None = None  # OFFSETS connections, kept (:meth:`_lookup`)
        self._dicts = OffsetDicts()  # Spark's offset dicts, the last ones made remembered
        # the brokers of the registry view latestOffset just read, for the partitions() call
        # that follows it (one registry read per micro-batch, not two)
        self._viewed: dict[int, BrokerAddress] | None = None

    # --- pickling (executors get the reader for read()) --------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_cluster"] = None
        state["last_admission"] = None
        state["_prefetch"] = Prefetch(self.options.cluster)  # a thread does not pickle
        state["_scanned"] = {}
        state["_offsets"] = None
        state["_viewed"] = None
        state["_dicts"] = OffsetDicts()
        return state

    # --- cluster access ----------------------------------------------------------------------

    def _get_cluster(self) -> Cluster:
        from kafka_pyspark.cluster import Cluster

        if self._cluster is None:
            self._cluster = Cluster(self.options.cluster)
        return self._cluster

    def _seen(self, brokers: dict[int, BrokerAddress]) -> dict[int, BrokerAddress]:
        """Remember where ``brokers`` (as the registry lists them now) are; returns them."""
        for b, a in brokers.items():
            self._addresses[b] = (a.host, a.port)
        return brokers

    def _brokers(self) -> dict[int, BrokerAddress]:
        return self._seen(self._get_cluster().brokers())

    def _topology(self) -> tuple[list[TopicPartition], dict[int, BrokerAddress]]:
        tps, brokers = current_view(self._get_cluster(), self.options.subscription)
        return tps, self._seen(brokers)

    def _view(self) -> tuple[list[TopicPartition], dict[int, Any]]:
        """Current broker-partitions and brokers; during a ZooKeeper outage (bounded by
        ``zk.outage.max.ms``, see :mod:`.stream_outage`) the last ones seen."""
        self._viewed = None  # set again only by a view read now
        registry = self._get_cluster().registry()
        known = self._known
        if registry is not None and known is not None and self._outage.waiting(
            registry.connected
        ):
            return known
        began = time.monotonic()
        try:
            view = self._topology()
        except RegistryUnavailableError as e:
            if known is None:  # nothing seen yet to go on with
                raise
            self._outage.failed(
                e, began, f"the last known {len(known[1])} broker(s) and {len(known[0])} "
                "broker-partition(s)",
            )
            return known
        self._outage.recovered()
        if known is None and registry is not None and not view[1]:
            from kafka_pyspark.chroot_hints import no_brokers_error

            raise no_brokers_error(registry)  # a wrong chroot must not run silently empty
        self._known = view
        self._viewed = view[1]
        return view

    def _lookup(self, brokers: Mapping[int, BrokerAddress]) -> OffsetLookup:
        """The query's OFFSETS connections (one per broker, kept between micro-batches and
        closed by :meth:`stop`), for the brokers registered now."""
        if self._offsets is None:
            self._offsets = OffsetLookup(brokers, self.options.cluster)
        else:
            self._offsets.update(brokers)
        return self._offsets

    def _lookup_bounds(
        self, lookup: OffsetLookup, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LogBounds]:
        """OFFSETS for each broker-partition, the brokers in parallel; one whose broker does
        not answer is left out (warned) and keeps its offset this micro-batch."""
        out, down = lookup.bounds_per_broker(tps)
        for broker, e in sorted(down.items()):
            log.warning(
                "kafka07 stream: broker %d did not answer OFFSETS (%s); its partitions "
                "keep their offsets until it does", broker, e,
            )
        self._bounds.update(out)
        return out

    # --- Spark API: offsets --------------------------------------------------------------------

    def initialOffset(self) -> dict[str, Any]:
        """Where a fresh query starts (a query restarted from a checkpoint never calls this).

        ``startingOffsets`` (default ``latest``), ``earliest``, ``group`` (``group.id``'s
        committed offsets; partitions it never committed start at the earliest), JSON, or
        ``startingTimestamp``, resolved with the batch reader's rules. Subscribed topics that do
        not exist yet are picked up from their earliest offset when they appear.
        """
        cluster = self._get_cluster()
        tps, brokers = self._view()
        opts = self.options
        committed = group_start(cluster, opts, tps)
        lookup = self._lookup(brokers)
        bounds = lookup.all_bounds(tps)
        self._bounds.update(bounds)
        starts = resolve_starts(
            opts.starting,
            tps,
            bounds,
            fail_on_data_loss=opts.fail_on_data_loss,
            committed=committed,
            before_time=lookup.before_time_asked(tps, opts.starting.timestamp),
        )
        self._latest = {tp: b.latest for tp, b in bounds.items()}
        self._initial = self._dicts.make(starts)
        log.info("kafka07 stream: initial offsets %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_bytes_per_trigger
        return ReadMaxBytes(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Record the log ends now: an ``availableNow`` query never reads past them."""
        tps, brokers = self._view()
        bounds = self._lookup_bounds(self._lookup(brokers), tps)
        self._target = {tp: b.latest for tp, b in bounds.items()}
        log.info("kafka07 stream: Trigger.AvailableNow target %s", to_offset_dict(self._target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end offset of the next micro-batch (``start`` itself when there is nothing).

        0. ``commitToGroup``: the micro-batch ending at ``start`` is committed by Spark, so its
           end goes to the group now (:meth:`_commit_previous`).
        1. Topology: broker-partitions new in the registry enter the offset at their earliest
           offset (read from the next micro-batch on); ones that vanished keep their offset.
        2. OFFSETS per current broker-partition (latest, earliest, segment starts); a broker
           that does not answer keeps its offsets. Data loss is checked here.
        3. ``Trigger.AvailableNow``: ends capped at the recorded target.
        4. ``ReadMaxBytes``: :func:`~.admission.admit` chooses ends at message boundaries.
        """
        begin = self._dicts.parse(start)
        self._scanned = self._prefetch.take()
        self._commit_previous(start)
        tps, brokers = self._view()
        change = diff_topology(begin, tps)
        if self._target is not None:  # appeared after the availableNow target was recorded
            new = tuple(tp for tp in change.new if tp in self._target)
        else:
            new = change.new
        lookup = self._lookup(brokers)
        bounds = self._lookup_bounds(lookup, [tp for tp in tps if tp in begin or tp in new])
        self._latest = {**(self._latest or {}), **{tp: b.latest for tp, b in bounds.items()}}
        added = self._enter_new(new, bounds)
        self._note_missing(change.missing)
        positions, reset = self._positions(begin, bounds)
        chosen = self._choose_ends(lookup, positions, bounds, limit)
        ends: Offsets = merge_topology(begin, added)
        for tp, (s, _) in positions.items():
            # an offset skipped for data loss (s > begin) is kept even with nothing new
            ends[tp] = max(chosen.get(tp, s), s)
        ends.update(reset)
        self._prefetch_next(brokers, positions, ends, limit)
        return self._dicts.make(ends)

    def _commit_previous(self, start: dict[str, Any]) -> None:
        """Step 0 of :meth:`latestOffset`: Spark asks for the offsets after ``start`` only once
        the micro-batch ending at ``start`` is committed; its ``commit()`` comes later, when
        the next one is planned, and never for the last one of an availableNow query. The
        initial offset of a fresh query is not a consumed position: never written."""
        if start != self._initial:
            self._commit_group(start)

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
        if missing and set(missing) != self._missing:
            log.warning("kafka07 stream: not in the registry now, offsets kept until they "
                        "return: %s", ", ".join(describe_tp(tp) for tp in missing))
        self._missing = set(missing)

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
        if self._target is not None:
            capped = cap_to_target({tp: lt for tp, (_, lt) in positions.items()}, self._target)
            positions = {tp: (s, max(s, capped.get(tp, s))) for tp, (s, _) in positions.items()}
        return positions, reset

    def _choose_ends(
        self,
        lookup: OffsetLookup,
        positions: Mapping[TopicPartition, tuple[int, int]],
        bounds: Mapping[TopicPartition, LogBounds],
        limit: ReadLimit,
    ) -> Mapping[TopicPartition, int]:
        """Step 4: every log end, or with ``ReadMaxBytes`` what admission control admits."""
        budget = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        if budget is None:
            return {tp: lt for tp, (_, lt) in positions.items()}
        result = admit(
            positions,
            budget,
            lambda windows: self._scan(lookup, windows, bounds),
            segment_starts={tp: bounds[tp].segment_starts for tp in positions},
            ages=self._ages,
        )
        self.last_admission = result
        self._ages = next_ages(self._ages, positions, result.ends)
        if result.oversize is not None:
            tp = result.oversize
            log.info(
                "kafka07 stream: %s: the next message (%d bytes) is larger than "
                "maxBytesPerTrigger=%d; this micro-batch is that message alone",
                describe_tp(tp), result.ends[tp] - positions[tp][0], budget,
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

    def _scan(
        self, lookup: OffsetLookup, windows: Windows, bounds: Mapping[TopicPartition, LogBounds]
    ) -> dict[TopicPartition, Scan]:
        """Header-only scans of byte windows: what the prefetch already scanned, the rest with
        one MULTIFETCH per broker."""
        out, misses = answer_from(self._scanned, windows, bounds)
        if misses:
            out.update(scan_windows(lookup.connection, misses))
        return out

    def _prefetch_next(
        self,
        brokers: Mapping[int, Any],
        positions: Mapping[TopicPartition, tuple[int, int]],
        ends: Mapping[TopicPartition, int],
        limit: ReadLimit,
    ) -> None:
        """With ``ReadMaxBytes``, start scanning what the next micro-batch will scan if no data
        arrives meanwhile (:mod:`.stream_prefetch`; only a guess, never trusted blindly)."""
        self._scanned = {}
        if not isinstance(limit, ReadMaxBytes) or not self.prefetch_scans:
            return
        after = {tp: (ends[tp], lt) for tp, (_, lt) in positions.items() if tp in ends}
        self._prefetch.start(brokers, predict_windows(after, limit.max_bytes))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The log ends seen by the last ``latestOffset`` (no extra I/O)."""
        if self._latest is None:
            return None
        return self._dicts.make(self._latest)

    # --- Spark API: planning and reading ---------------------------------------------------------

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """Ranges ``[start, end)`` per broker-partition: a pure function of the two offsets.

        A broker-partition only in ``end`` entered the stream in this micro-batch (at its
        earliest offset) and has nothing to read yet; one whose end is before its start was
        reset after data loss (``failOnDataLoss=false``) and has nothing to read either.
        """
        begin = self._dicts.parse(start)
        stop = self._dicts.parse(end)
        ranges = [
            OffsetRange(t, b, p, begin[(t, b, p)], e)
            for (t, b, p), e in sorted(stop.items())
            if (t, b, p) in begin and e > begin[(t, b, p)]
        ]
        if not ranges:
            return []
        addresses = self._addresses_for({r.broker for r in ranges})
        return plan_partitions(
            ranges,
            addresses,
            self.settings,
            segment_starts={tp: b.segment_starts for tp, b in self._bounds.items()},
            min_partitions=self.options.min_partitions,
        )

    def _addresses_for(self, brokers: set[int]) -> dict[int, tuple[str, int]]:
        """Where to reach ``brokers``: the registry as the ``latestOffset`` just before read
        it, or the registry now (a query restarted from a checkpoint plans its last
        micro-batch first), else the last address seen (a broker that is restarting; executors
        retry connections, then fail naming host:port)."""
        viewed, self._viewed = self._viewed, None
        if viewed is not None and brokers <= set(viewed):
            return {b: (viewed[b].host, viewed[b].port) for b in brokers}
        missing = brokers - set(self._addresses)
        registry = self._get_cluster().registry()
        # during a ZooKeeper outage (warned once) a call that can only time out is skipped
        away = self._outage.active and registry is not None and not registry.connected
        if missing or not away:
            try:
                self._brokers()
            except KafkaError as e:
                if missing:
                    raise
                if not self._outage.active:
                    log.warning("kafka07 stream: could not list brokers (%s); using the last "
                                "known addresses", e)
        missing = brokers - set(self._addresses)
        if missing:
            raise BrokerConnectionError(
                f"broker(s) {sorted(missing)} hold data of this micro-batch but are not "
                "registered and were never seen by this query: cannot plan the read"
            )
        return {b: self._addresses[b] for b in brokers}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        worker_gc.settle()
        return read_partition(partition)

    # --- Spark API: commit and stop --------------------------------------------------------------

    def commit(self, end: dict[str, Any]) -> None:
        """After Spark committed a micro-batch: with ``commitToGroup=true``, write its end
        offsets to ``/consumers/[group.id]/offsets/[topic]/[brokerId]-[partition]`` (the
        decimal next byte offset, as 0.7's ZookeeperConsumerConnector does)."""
        self._commit_group(end)

    def _commit_group(self, end: dict[str, Any]) -> None:
        """With ``commitToGroup``, hand ``end`` to the group (:mod:`.stream_group`: written
        now, or kept while ZooKeeper is away)."""
        if self._group is not None:
            self._group.commit(end, lambda: self._get_cluster().registry())

    def stop(self) -> None:
        self._prefetch.close()
        offsets, self._offsets = self._offsets, None
        if offsets is not None:
            offsets.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
