"""A stream's driver-side I/O: a read's offset reader and what only a stream does besides.

:class:`StreamOffsetReader` is to :class:`~.reader.Kafka07StreamReader` what Spark's
``KafkaOffsetReader`` is to its ``KafkaMicroBatchStream``: the stream reader decides (where a
micro-batch ends, data loss, when to commit to the group), this object asks and remembers. It
is the batch reader's :class:`~kafka_pyspark._spark.read.offset_reader.OffsetReader` (the
registry view, read leniently; the OFFSETS connections, one per broker with its own long-lived
thread, kept from micro-batch to micro-batch; the brokers' addresses for planning) and adds:

- during a ZooKeeper outage, the last view seen (:mod:`.outage`);
- OFFSETS that leave out a broker that does not answer (its partitions keep their offsets);
- the boundary scans of ``maxBytesPerTrigger`` and their prefetch (:mod:`.prefetch`);
- the group commits (:mod:`.group`).

A pickled copy (an executor's reader) is a fresh one for the same options. :meth:`close` (the
stream's ``stop()``) ends its connections and threads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._spark.read.discovery import View
from kafka_pyspark._spark.read.log_bounds import LogBounds
from kafka_pyspark._spark.read.offset_reader import OffsetReader
from kafka_pyspark._spark.stream.group import GroupCommitter
from kafka_pyspark._spark.stream.outage import ZooKeeperOutage
from kafka_pyspark._spark.stream.prefetch import Prefetch, answer_from, scan_windows
from kafka_pyspark._spark.stream.scan import Scan, Windows
from kafka_pyspark.errors import RegistryUnavailableError

if TYPE_CHECKING:
    from kafka_pyspark._options import ReadOptions

__all__ = ["StreamOffsetReader"]

log = logging.getLogger("kafka_pyspark._spark.stream.reader")


class StreamOffsetReader(OffsetReader):
    """One stream's brokers and registry, asked and remembered (see the module docstring)."""

    def __init__(self, options: ReadOptions) -> None:
        super().__init__(options)
        self._outage = ZooKeeperOutage(options.cluster.zk_connect or "", options.zk_outage_max_ms)
        self._group = (
            GroupCommitter(options.group_id, self._outage) if options.commit_to_group else None
        )
        self._prefetch = Prefetch(options.cluster)

    # --- registry --------------------------------------------------------------------------------

    def view(self) -> View:
        """Current broker-partitions and brokers (:meth:`OffsetReader.view`); during a
        ZooKeeper outage (bounded by ``zk.outage.max.ms``, see :mod:`.outage`) the last ones
        seen."""
        registry = self.cluster().registry()
        known = self.known
        if registry is not None and known is not None and self._outage.waiting(
            registry.connected
        ):
            return known
        began = time.monotonic()
        try:
            found = super().view()
        except RegistryUnavailableError as e:
            if known is None:  # nothing seen yet to go on with
                raise
            self._outage.failed(
                e, began, f"the last known {len(known[1])} broker(s) and {len(known[0])} "
                "broker-partition(s)",
            )
            return known
        self._outage.recovered()
        return found

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
        out, down = self.bounds_per_broker(tps)
        for broker, e in sorted(down.items()):
            log.warning(
                "kafka07 stream: broker %d did not answer OFFSETS (%s); its partitions "
                "keep their offsets until it does", broker, e,
            )
        return out

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
                out.update(scan_windows(self.lookup, misses))
            return out

        return scan

    def prefetch(self, windows: Windows) -> None:
        """Start scanning ``windows`` in the background, for the next :meth:`scanner`."""
        known = self.known
        self._prefetch.start(known[1] if known else {}, windows)

    @property
    def prefetches(self) -> int:
        """How many prefetches were started (tests, debugging)."""
        return self._prefetch.started

    def close(self) -> None:
        """End the prefetch, the OFFSETS connections and their threads, and the registry."""
        self._prefetch.close()
        super().close()
