"""``commitToGroup``: a stream's micro-batch ends written to a 0.7 consumer group in ZooKeeper.

Where the ends go: ``/consumers/[group.id]/offsets/[topic]/[brokerId]-[partition]``, the
decimal next byte offset, as 0.7's ZookeeperConsumerConnector writes it
(:meth:`~kafka_pyspark._cluster.registry.Registry.commit_group_offsets`).

What: the first commit writes every broker-partition's offset (creating the nodes); after
that only the offsets that moved since the last commit, all topics in one pipelined round of
writes (:meth:`~kafka_pyspark._cluster.registry.Registry.commit_group_offsets_of`).

When (``docs/streaming.md``, "Committing to a 0.7 consumer group"): Spark calls
``commit(end)`` only when it plans the *next* micro-batch (and never after the last one of an
``availableNow`` query), but asks ``latestOffset(start)`` only once the micro-batch ending at
``start`` is committed. The stream reader hands a micro-batch's end to
:meth:`GroupCommitter.commit` at whichever comes first, so while micro-batch N runs, ZooKeeper
holds the end of N-1, and an ``availableNow`` query leaves its final position.

While ZooKeeper is away (:class:`~kafka_pyspark._spark.stream.outage.ZooKeeperOutage`) the
newest end is kept as the one pending commit and written on the first call after it is back:
Spark hands ends over in micro-batch order, so the group's offsets never go backwards.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka_pyspark._spark.stream.checkpoint import from_offset_dict
from kafka_pyspark._spark.stream.outage import ZooKeeperOutage
from kafka_pyspark.errors import KafkaError, RegistryUnavailableError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Registry

__all__ = ["GroupCommitter"]


class GroupCommitter:
    """Writes stream offsets (Spark's JSON dicts) to consumer group ``group``."""

    def __init__(self, group: str | None, outage: ZooKeeperOutage) -> None:
        self.group = group
        self._outage = outage
        self.committed: dict[str, Any] | None = None  # last written to the group
        self.pending: dict[str, Any] | None = None  # newest end not written yet

    def commit(self, end: dict[str, Any], registry: Callable[[], Registry | None]) -> None:
        """Write ``end`` to the group, or, while ZooKeeper is away, keep it as the one pending
        commit (it replaces any older one, never written after it)."""
        if end != self.committed:
            self.pending = end
        pending = self.pending
        if pending is None:
            return
        reg = registry()
        if reg is None or self.group is None:  # options make this impossible
            raise KafkaError("commitToGroup needs zk.connect and group.id")
        if self._outage.waiting(reg.connected):
            return
        moved = from_offset_dict(pending)
        if self.committed is not None:  # only the offsets that moved since then are written
            before = from_offset_dict(self.committed)
            moved = {tp: off for tp, off in moved.items() if before.get(tp) != off}
        by_topic: dict[str, dict[tuple[int, int], int]] = {}
        for (topic, broker, partition), off in moved.items():
            by_topic.setdefault(topic, {})[(broker, partition)] = off
        creator = f"{socket.gethostname()}-{os.getpid()}-kafka_pyspark"
        began = time.monotonic()
        try:
            reg.commit_group_offsets_of(self.group, by_topic, creator=creator,
                                        listed=self.committed is None)
        except RegistryUnavailableError as e:
            self._outage.failed(e, began, "its data path (the brokers need no ZooKeeper)")
            return
        self._outage.recovered()
        self.committed, self.pending = pending, None
