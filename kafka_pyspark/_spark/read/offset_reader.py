"""A read's driver-side I/O: every round trip to ZooKeeper and the brokers, and its caches.

:class:`OffsetReader` is what Spark's ``KafkaOffsetReader`` is to its batch and micro-batch
readers: the one driver-side path to the cluster. The readers decide (where a read starts and
ends, data loss, planning); this object asks and remembers:

- the broker-partitions and brokers (:func:`~.discovery.discover`: strictly for a batch read,
  leniently for a stream, whose topology may change), the view last read, and every broker
  address seen (for planning);
- the OFFSETS connections, one per broker with its own long-lived thread
  (:class:`~.log_bounds.OffsetLookup`), and their answers: log ends, segment starts for
  planning, ``startingTimestamp`` lookups;
- what a consumer group committed (``startingOffsets=group``), and so where a read starts
  (:meth:`OffsetReader.starts`).

The batch reader opens one per plan (:func:`~.batch.plan_batch`); a stream keeps one for the
whole query (:class:`~kafka_pyspark._spark.stream.offset_reader.StreamOffsetReader` adds what
only a stream does). It opens nothing until asked, so a fresh one is valid as it is: a pickled
copy (an executor's reader) is a fresh one for the same options. :meth:`close` ends its
connections and threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.discovery import View, discover, group_start
from kafka_pyspark._spark.read.log_bounds import LogBounds, OffsetLookup
from kafka_pyspark._spark.read.start_end import resolve_starts
from kafka_pyspark.errors import BrokerConnectionError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, Cluster
    from kafka_pyspark._options import ReadOptions

__all__ = ["OffsetReader"]


class OffsetReader(Closing):
    """One read's cluster, asked and remembered (see the module docstring)."""

    def __init__(self, options: ReadOptions) -> None:
        self._options = options
        self._cluster: Cluster | None = None  # opened at the first registry or broker call
        self._lookup = OffsetLookup({}, options.cluster)  # brokers set by each view read
        self._known: View | None = None  # the last view read
        self._addresses: dict[int, tuple[str, int]] = {}  # every broker address seen
        self._bounds: dict[TopicPartition, LogBounds] = {}  # the last OFFSETS answers
        self._latest: dict[TopicPartition, int] | None = None  # log ends; None before any

    def __reduce__(self) -> tuple[type[OffsetReader], tuple[ReadOptions]]:
        """Pickled as a fresh reader for the same options (connections and threads do not
        pickle, and executors need none of them)."""
        return (type(self), (self._options,))

    # --- registry --------------------------------------------------------------------------------

    def cluster(self) -> Cluster:
        from kafka_pyspark._cluster import Cluster

        if self._cluster is None:
            self._cluster = Cluster(self._options.cluster)
        return self._cluster

    @property
    def known(self) -> View | None:
        """The last view read (None before the first)."""
        return self._known

    def view(self) -> View:
        """The broker-partitions the subscription covers now and the live brokers
        (:func:`~.discovery.discover`: strict in a batch read; in a stream only the first view
        fails on no registered broker)."""
        tps, brokers = discover(
            self.cluster(),
            self._options.subscription,
            strict=self._options.mode == "batch",
            first=self._known is None,
        )
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

    # --- OFFSETS ---------------------------------------------------------------------------------

    @property
    def lookup(self) -> OffsetLookup:
        """The OFFSETS connections (one per broker of the last view, each on its own thread)."""
        return self._lookup

    def bounds_per_broker(
        self, tps: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, LogBounds], dict[int, BrokerConnectionError]]:
        """OFFSETS for each broker-partition (the brokers of the last view), the brokers in
        parallel; a broker that does not answer is left out, with its error."""
        found, down = self._lookup.bounds_per_broker(tps)
        return self._remember(found), down

    def all_bounds(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """OFFSETS for each broker-partition; a broker that does not answer raises."""
        return self._remember(self._lookup.all_bounds(tps))

    def _remember(self, found: dict[TopicPartition, LogBounds]) -> dict[TopicPartition, LogBounds]:
        self._bounds.update(found)
        self._latest = {**(self._latest or {}), **{tp: b.latest for tp, b in found.items()}}
        return found

    def starts(
        self, tps: Sequence[TopicPartition], known: Sequence[TopicPartition] | None = None
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, LogBounds]]:
        """Where a read of ``tps`` starts (``startingOffsets``/``startingTimestamp``, resolved
        by :func:`~.start_end.resolve_starts`: the batch reader's and a fresh stream's rules are
        one) and the OFFSETS answers it was resolved on; a broker that does not answer raises.
        ``known``: every broker-partition discovery found (an offset named for one a pushed
        filter left out is no error)."""
        options = self._options
        committed = self.group_start(tps)
        bounds = self.all_bounds(tps)
        starts = resolve_starts(
            options.starting,
            tps,
            bounds,
            fail_on_data_loss=options.fail_on_data_loss,
            committed=committed,
            before_time=self.before_time_asked(tps, options.starting.timestamp),
            known=known,
        )
        return starts, bounds

    def before_time_asked(
        self, tps: Iterable[TopicPartition], time_ms: int | None
    ) -> Callable[[TopicPartition, int], int | None]:
        """:meth:`~kafka_pyspark._spark.read.log_bounds.OffsetLookup.before_time_asked` on the
        reader's connections."""
        return self._lookup.before_time_asked(tps, time_ms)

    def latest(self) -> dict[TopicPartition, int] | None:
        """The log end of every broker-partition that ever answered, as last answered (None
        before the first OFFSETS)."""
        return None if self._latest is None else dict(self._latest)

    def known_bounds(self, tp: TopicPartition) -> LogBounds | None:
        """The last OFFSETS answer for ``tp``, if any."""
        return self._bounds.get(tp)

    def segment_starts(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The segment starts last seen per broker-partition (where planning may split)."""
        return {tp: b.segment_starts for tp, b in self._bounds.items()}

    # --- planning --------------------------------------------------------------------------------

    def addresses_for(self, brokers: set[int]) -> dict[int, tuple[str, int]]:
        """Where to reach ``brokers``: as the last view read listed them, or, for a broker this
        reader never saw (a query restarted from a checkpoint plans its last micro-batch
        first), as the registry lists it now. A broker that is restarting keeps its last
        address: executors retry connections, then fail naming host:port."""
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
        """End the OFFSETS connections and their threads, and the registry."""
        self._lookup.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
