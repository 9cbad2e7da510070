"""OFFSETS on the driver: what each broker-partition's log holds now.

:class:`OffsetLookup` opens one connection per broker (lazily) and asks OFFSETS for the log
bounds (earliest, latest and every segment start, in one request: :class:`LogBounds`) and for
``startingTimestamp`` lookups. The requests themselves are :mod:`kafka_pyspark.client.offsets`.

Offset semantics (Kafka 0.7; seed 003 "Offsets"). Offsets are byte positions. ``latest`` is the
flushed log end, the offset the next message will get. ``earliest`` is the start of the oldest
segment still on disk. ``startingTimestamp`` uses OFFSETS with ``time = ts`` and max 1: the start
of the newest segment last modified before ``ts`` (or the log end when the whole log is older);
if no segment is that old, the earliest offset. 0.7 keeps no per-message time, so this reads
everything written at or after ``ts`` plus possibly older messages of that one segment.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_pyspark._closing import Closing
from kafka_pyspark.cluster_options import ClusterOptions
from kafka_pyspark.errors import BrokerConnectionError, TopicNotFoundError
from kafka_pyspark.names import TopicPartition

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection
    from kafka_pyspark.cluster_options import BrokerAddress

__all__ = ["LogBounds", "OffsetLookup"]


@dataclass
class _Answers:
    """One broker's OFFSETS answers, filled by its thread: the bounds found, the first error."""

    found: dict[TopicPartition, LogBounds] = field(default_factory=dict)
    error: Exception | None = None


@dataclass(frozen=True)
class LogBounds:
    """What OFFSETS says about one broker-partition log."""

    earliest: int
    latest: int
    segment_starts: tuple[int, ...] = ()  # ascending, every one < latest

    def boundaries(self) -> tuple[int, ...]:
        """Offsets known to be message boundaries: segment starts and the end."""
        return (*self.segment_starts, self.latest)


class OffsetLookup(Closing):
    """Driver-side OFFSETS requests: one lazily opened connection per broker. Context manager.

    Ask only about broker-partitions that exist (from :func:`discover`): a 0.7.2 broker closes
    the connection instead of answering OFFSETS for a partition it does not have.

    A stream keeps one lookup for the whole query (:meth:`update` when brokers move): its
    connections are reused from micro-batch to micro-batch (a connection the broker closed
    while idle is reopened by :class:`~kafka_pyspark.client.BrokerConnection`).
    """

    def __init__(self, brokers: Mapping[int, BrokerAddress], options: ClusterOptions) -> None:
        self._brokers = dict(brokers)
        self._options = options
        self._conns: dict[int, BrokerConnection] = {}

    def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()

    def update(self, brokers: Mapping[int, BrokerAddress]) -> None:
        """Brokers as the registry lists them now: the connection to a broker that moved
        (another host:port) or left is closed, the others are kept."""
        brokers = dict(brokers)
        for broker in list(self._conns):
            if brokers.get(broker) != self._brokers.get(broker):
                self._conns.pop(broker).close()
        self._brokers = brokers

    def connection(self, broker: int) -> BrokerConnection:
        from kafka_pyspark.cluster import connect

        conn = self._conns.get(broker)
        if conn is None:
            address = self._brokers.get(broker)
            if address is None:
                raise TopicNotFoundError(
                    f"broker {broker} is not known (live brokers: {sorted(self._brokers)})"
                )
            conn = self._conns[broker] = connect(
                broker,
                address,
                self._options.socket_timeout_ms,
                self._options.socket_buffer_size,
            )
        return conn

    def bounds(self, tp: TopicPartition) -> LogBounds:
        """Earliest, latest and the segment starts, from one OFFSETS (latest, many) request."""
        from kafka_pyspark.client import segment_starts

        topic, broker, partition = tp
        got = segment_starts(self.connection(broker), topic, partition)
        earliest = got.starts[0] if got.starts else got.end
        return LogBounds(earliest, got.end, tuple(got.starts))

    def all_bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        return {tp: self.bounds(tp) for tp in tps}

    def bounds_per_broker(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, LogBounds], dict[int, BrokerConnectionError]]:
        """:meth:`bounds` of each broker-partition, the brokers asked at the same time (one
        thread each; 0.7 has no OFFSETS request for several partitions), each broker's
        partitions one after the other on its connection. A broker that does not answer is
        left out from its first failure on, with the error; any other error is raised."""
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            by_broker.setdefault(tp[1], []).append(tp)
        out: dict[TopicPartition, LogBounds] = {}
        down: dict[int, BrokerConnectionError] = {}
        answers = {b: _Answers() for b in by_broker}
        if len(by_broker) == 1:
            (broker, part), = by_broker.items()
            self._broker_bounds(part, answers[broker])
        else:  # every request has the socket timeout: each thread ends
            threads = [
                threading.Thread(target=self._broker_bounds, args=(part, answers[broker]),
                                 name=f"kafka07-offsets-{broker}", daemon=True)
                for broker, part in by_broker.items()
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for broker, a in answers.items():
            if isinstance(a.error, BrokerConnectionError):
                down[broker] = a.error
            elif a.error is not None:
                raise a.error
            out.update(a.found)
        return out, down

    def _broker_bounds(self, tps: Sequence[TopicPartition], answers: _Answers) -> None:
        """Fill ``answers``; stop at the first error (raised in the caller's thread)."""
        for tp in tps:
            try:
                answers.found[tp] = self.bounds(tp)
            except Exception as e:  # handed to the caller's thread, raised there
                answers.error = e
                return

    def before_time(self, tp: TopicPartition, time_ms: int) -> int | None:
        """0.7's offset "before" ``time_ms`` (see the module docstring); None if none."""
        from kafka_pyspark.client import before_time

        topic, broker, partition = tp
        return before_time(self.connection(broker), topic, partition, time_ms)

    def check_partition(self, tp: TopicPartition) -> bool:
        """Whether the broker has this partition (FETCH max 0: WrongPartition means no)."""
        from kafka_pyspark.errors import WrongPartitionError

        topic, broker, partition = tp
        resp = self.connection(broker).fetch(topic, partition, 0, 0)
        return resp.error != WrongPartitionError.code
