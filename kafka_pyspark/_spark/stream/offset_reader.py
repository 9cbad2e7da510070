"""A stream's driver-side I/O: every round trip to the brokers and ZooKeeper, and its caches.

:class:`StreamOffsetReader` is to :class:`~.reader.Kafka07StreamReader` what Spark's
``KafkaOffsetReader`` is to its ``KafkaMicroBatchStream``: the stream reader decides (where a
micro-batch ends, data loss, when to commit to the group), this object asks and remembers:

- the registry view (broker-partitions and brokers,
:func:`~kafka_pyspark._spark.read.discovery.current_view`) and,
  during a ZooKeeper outage, the last one seen (:mod:`.outage`);
- the OFFSETS connections, one per broker with its own long-lived thread, kept from
  micro-batch to micro-batch (:class:`~kafka_pyspark._spark.read.log_bounds.OffsetLookup`), and the
  answers: log ends for ``reportLatestOffset``, segment starts for planning;
- the boundary scans of ``maxBytesPerTrigger`` and their prefetch (:mod:`.prefetch`);
- the brokers' addresses for planning a micro-batch, and the group commits
  (:mod:`.group`).

It opens nothing until asked, so a fresh one is valid as it is: a pickled copy (an executor's
reader) is a fresh one for the same options. :meth:`close` (the stream's ``stop()``) ends its
connections and threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.discovery import current_view, group_start
from kafka_pyspark._spark.read.log_bounds import LogBounds, OffsetLookup
from kafka_pyspark._spark.stream.checkpoint import Offsets
from kafka_pyspark._spark.stream.group import GroupCommitter
from kafka_pyspark._spark.stream.outage import ZooKeeperOutage
from kafka_pyspark._spark.stream.prefetch import Prefetch, answer_from, scan_windows
from kafka_pyspark._spark.stream.scan import Scan, Windows
from kafka_pyspark.errors import BrokerConnectionError, RegistryUnavailableError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster
    from kafka_pyspark._spark.options import ReadOptions

__all__ = ["StreamOffsetReader", "View"]

log = logging.getLogger("kafka_pyspark._spark.stream.reader")

View = tuple[list[TopicPartition], dict[int, "BrokerAddress"]]
"""Broker-partitions and brokers, as the registry lists them."""


class StreamOffsetReader(Closing):
    """One stream's brokers and registry, asked and remembered (see the module docstring)."""

    def __init__(self, options: ReadOptions) -> None:
        self._options = options
        self._cluster: Cluster | None = None  # opened at the first registry or broker call
        self._lookup = OffsetLookup({}, options.cluster)  # brokers set by each view read
        self._outage = ZooKeeperOutage(options.cluster.zk_connect or "", options.zk_outage_max_ms)
        self._group = (
            GroupCommitter(options.group_id, self._outage) if options.commit_to_group else None
        )
        self._prefetch = Prefetch(options.cluster)
        self._known: View | None = None  # the last view read (the one kept in an outage)
        self._addresses: dict[int, tuple[str, int]] = {}  # every broker address seen
        self._bounds: dict[TopicPartition, LogBounds] = {}  # the last OFFSETS answers
        self._latest: Offsets | None = None  # the log ends seen; None before any answer

    def __reduce__(self) -> tuple[type[StreamOffsetReader], tuple[ReadOptions]]:
        """Pickled as a fresh reader for the same options (connections and threads do not
        pickle, and executors need none of them)."""
        return (type(self), (self._options,))

    # --- registry --------------------------------------------------------------------------------

    def cluster(self) -> Cluster:
        from kafka_pyspark._cluster import Cluster

        if self._cluster is None:
            self._cluster = Cluster(self._options.cluster)
        return self._cluster

    def view(self) -> View:
        """Current broker-partitions and brokers; during a ZooKeeper outage (bounded by
        ``zk.outage.max.ms``, see :mod:`.outage`) the last ones seen."""
        registry = self.cluster().registry()
        known = self._known
        if registry is not None and known is not None and self._outage.waiting(
            registry.connected
        ):
            return known
        began = time.monotonic()
        try:
            tps, brokers = current_view(self.cluster(), self._options.subscription)
        except RegistryUnavailableError as e:
            if known is None:  # nothing seen yet to go on with
                raise
            self._outage.failed(
                e, began, f"the last known {len(known[1])} broker(s) and {len(known[0])} "
                "broker-partition(s)",
            )
            return known
        self._outage.recovered()
        if known is None and registry is not None and not brokers:
            from kafka_pyspark._cluster import no_brokers_error

            raise no_brokers_error(registry)  # a wrong chroot must not run silently empty
        self._seen(brokers)
        self._lookup.update(brokers)
        self._known = (tps, brokers)
        return tps, brokers

    def _seen(self, brokers: Mapping[int, BrokerAddress]) -> None:
        for b, a in brokers.items():
            self._addresses[b] = (a.host, a.port)

    def group_start(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        """What ``group.id`` committed for ``tps`` when ``startingOffsets=group``, else None."""
        return group_start(self.cluster(), self._options, tps)

    def commit_group(self, end: dict[str, Any]) -> None:
        """With ``commitToGroup``, hand ``end`` to the group (:mod:`.group`: written
        now, or kept while ZooKeeper is away); nothing otherwise."""
        if self._group is not None:
            self._group.commit(end, lambda: self.cluster().registry())

    # --- OFFSETS ---------------------------------------------------------------------------------

    def bounds(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """OFFSETS for each broker-partition (the brokers of the last view), the brokers in
        parallel; one whose broker does not answer is left out (warned) and keeps its offset
        this micro-batch."""
        out, down = self._lookup.bounds_per_broker(tps)
        for broker, e in sorted(down.items()):
            log.warning(
                "kafka07 stream: broker %d did not answer OFFSETS (%s); its partitions "
                "keep their offsets until it does", broker, e,
            )
        return self._remember(out)

    def all_bounds(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """:meth:`bounds`, but a broker that does not answer raises (a query's start)."""
        return self._remember(self._lookup.all_bounds(tps))

    def _remember(self, found: dict[TopicPartition, LogBounds]) -> dict[TopicPartition, LogBounds]:
        self._bounds.update(found)
        self._latest = {**(self._latest or {}), **{tp: b.latest for tp, b in found.items()}}
        return found

    def before_time_asked(
        self, tps: Iterable[TopicPartition], time_ms: int | None
    ) -> Callable[[TopicPartition, int], int | None]:
        """:meth:`~kafka_pyspark._spark.read.log_bounds.OffsetLookup.before_time_asked` on the
        stream's connections."""
        return self._lookup.before_time_asked(tps, time_ms)

    def latest(self) -> Offsets | None:
        """The log end of every broker-partition that ever answered, as last answered (None
        before the first OFFSETS)."""
        return None if self._latest is None else dict(self._latest)

    def known_bounds(self, tp: TopicPartition) -> LogBounds | None:
        """The last OFFSETS answer for ``tp``, if any."""
        return self._bounds.get(tp)

    def segment_starts(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The segment starts last seen per broker-partition (where planning may split)."""
        return {tp: b.segment_starts for tp, b in self._bounds.items()}

    # --- boundary scans --------------------------------------------------------------------------

    def scanner(
        self, bounds: Mapping[TopicPartition, LogBounds]
    ) -> Callable[[Windows], dict[TopicPartition, Scan]]:
        """Header-only scans of byte windows for one micro-batch's admission: what the
        prefetch scanned (taken now: it is over), the rest with one MULTIFETCH per broker."""
        scanned = self._prefetch.take()

        def scan(windows: Windows) -> dict[TopicPartition, Scan]:
            out, misses = answer_from(scanned, windows, bounds)
            if misses:
                out.update(scan_windows(self._lookup, misses))
            return out

        return scan

    def prefetch(self, windows: Windows) -> None:
        """Start scanning ``windows`` in the background, for the next :meth:`scanner`."""
        self._prefetch.start(self._known[1] if self._known else {}, windows)

    @property
    def prefetches(self) -> int:
        """How many prefetches were started (tests, debugging)."""
        return self._prefetch.started

    # --- planning --------------------------------------------------------------------------------

    def addresses_for(self, brokers: set[int]) -> dict[int, tuple[str, int]]:
        """Where to reach ``brokers``: as the last view read listed them (every
        ``latestOffset`` reads one), or, for a broker this reader never saw (a query restarted
        from a checkpoint plans its last micro-batch first), as the registry lists it now. A
        broker that is restarting keeps its last address: executors retry connections, then
        fail naming host:port."""
        if not brokers <= set(self._addresses):
            self._seen(self.cluster().brokers())
        missing = brokers - set(self._addresses)
        if missing:
            raise BrokerConnectionError(
                f"broker(s) {sorted(missing)} hold data of this micro-batch but are not "
                "registered and were never seen by this query: cannot plan the read"
            )
        return {b: self._addresses[b] for b in brokers}

    def close(self) -> None:
        """End the prefetch, the OFFSETS connections and their threads, and the registry."""
        self._prefetch.close()
        self._lookup.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
