"""OFFSETS on the driver: what each broker-partition's log holds now.

:class:`OffsetLookup` opens one connection per broker (lazily) and asks OFFSETS for the log
bounds (earliest, latest and every segment start, in one request: :class:`LogBounds`) and for
``startingTimestamp`` lookups. The requests themselves are :mod:`kafka_pyspark.client._offsets`.

Offset semantics (Kafka 0.7; docs/dev/PROTOCOL.md "OFFSETS"). Offsets are byte positions. ``latest``
is the flushed log end, the offset the next message will get. ``earliest`` is the start of the
oldest segment still on disk. ``startingTimestamp`` uses OFFSETS with ``time = ts`` and max 1: the
start of the newest segment last modified before ``ts`` (or the log end when the whole log is
older); if no segment is that old, the earliest offset. 0.7 keeps no per-message time, so this reads
everything written at or after ``ts`` plus possibly older messages of that one segment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kafka_pyspark._cluster import ClusterOptions
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark.client._brokers import BrokerConnections, BrokerPool, ConnectionSettings
from kafka_pyspark.errors import BrokerConnectionError, TopicNotFoundError

if TYPE_CHECKING:
    from kafka_pyspark import _wire as wire
    from kafka_pyspark._cluster import BrokerAddress
    from kafka_pyspark.client import BrokerConnection

__all__ = ["LogBounds", "OffsetLookup"]

_W = TypeVar("_W")
_R = TypeVar("_R")


def _raise_first(tps: Sequence[TopicPartition], found: Mapping[TopicPartition, object],
                 down: Mapping[int, BrokerConnectionError]) -> None:
    """Raise the error of the first broker-partition of ``tps`` whose broker failed."""
    for tp in tps:
        if tp not in found and tp[1] in down:
            raise down[tp[1]]


def _addresses(brokers: Mapping[int, BrokerAddress]) -> dict[int, tuple[str, int]]:
    return {b: (a.host, a.port) for b, a in brokers.items()}


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
    """Driver-side OFFSETS requests: one lazily opened connection per broker, each used by
    its broker's thread (:class:`~kafka_pyspark.client._brokers.BrokerPool`). Context manager.

    Ask only about broker-partitions that exist (from :func:`discover`): a 0.7.2 broker closes
    the connection instead of answering OFFSETS for a partition it does not have.

    A stream keeps one lookup for the whole query (:meth:`update` when brokers move): its
    connections and threads are reused from micro-batch to micro-batch (a connection the
    broker closed while idle is reopened by :class:`~kafka_pyspark.client.BrokerConnection`).
    """

    def __init__(self, brokers: Mapping[int, BrokerAddress], options: ClusterOptions) -> None:
        self._brokers = dict(brokers)
        settings = ConnectionSettings(timeout=options.socket_timeout_ms / 1000.0,
                                      buffer_size=options.socket_buffer_size)
        self._pool = BrokerPool(BrokerConnections(_addresses(brokers), settings))

    def close(self) -> None:
        self._pool.close()

    def per_broker(self, work: Mapping[int, _W], fn: Callable[[int, _W], _R]) -> dict[int, _R]:
        """``fn(broker, work[broker])`` for every broker at the same time, each on its broker's
        thread of this lookup (kept until :meth:`close`); a single broker runs in the caller's
        thread. Every request ``fn`` makes has its socket timeout, so every call ends; then the
        first error raised on a worker is raised here
        (:meth:`~kafka_pyspark.client._brokers.BrokerPool.run`)."""
        return self._pool.run(work, fn)

    def update(self, brokers: Mapping[int, BrokerAddress]) -> None:
        """Brokers as the registry lists them now: the connection to a broker that moved
        (another host:port) or left is closed, the others are kept."""
        self._brokers = dict(brokers)
        self._pool.connections.update(_addresses(brokers))

    def connection(self, broker: int) -> BrokerConnection:
        if broker not in self._pool.connections:
            raise TopicNotFoundError(
                f"broker {broker} is not known (live brokers: {sorted(self._brokers)})"
            )
        return self._pool.connections.get(broker)

    def bounds(self, tp: TopicPartition) -> LogBounds:
        """Earliest, latest and the segment starts, from one OFFSETS (latest, many) request."""
        return self.all_bounds([tp])[tp]

    def all_bounds(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LogBounds]:
        """:meth:`bounds` of each broker-partition (:meth:`bounds_per_broker`); a broker that
        does not answer raises its error (that of the first such broker-partition of
        ``tps``)."""
        tps = list(tps)
        found, down = self.bounds_per_broker(tps)
        _raise_first(tps, found, down)
        return {tp: found[tp] for tp in tps}

    def bounds_per_broker(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, LogBounds], dict[int, BrokerConnectionError]]:
        """:meth:`bounds` of each broker-partition: the brokers asked at the same time
        (:meth:`per_broker`; 0.7 has no OFFSETS request for several partitions), each one's
        requests pipelined on its connection
        (:meth:`~kafka_pyspark.client.BrokerConnection.offsets_pipelined`). A broker that does
        not answer is left out from its first failure on, with the error; any other error is
        raised."""
        from kafka_pyspark.client._offsets import segment_starts_of

        def ask(broker: int, mine: Sequence[TopicPartition]) -> tuple[
                dict[TopicPartition, LogBounds], BrokerConnectionError | None]:
            found, error = segment_starts_of(self.connection(broker), [(t, p) for t, _, p in mine])
            return {tp: LogBounds(s.earliest, s.end, tuple(s.starts))
                    for tp, s in zip(mine, found, strict=False)}, error

        return self._gather(tps, ask)

    def before_times(self, tps: Iterable[TopicPartition],
                     time_ms: int) -> dict[TopicPartition, int | None]:
        """:meth:`before_time` of each broker-partition, pipelined as :meth:`all_bounds`."""
        from kafka_pyspark.client._offsets import before_time_request

        tps = list(tps)
        found, down = self._ask(
            tps, lambda tp: before_time_request(tp[0], tp[2], time_ms),
            lambda _tp, got, _address: got[0] if got else None,
        )
        _raise_first(tps, found, down)
        return {tp: found[tp] for tp in tps}

    def _ask(
        self,
        tps: Iterable[TopicPartition],
        request: Callable[[TopicPartition], wire.OffsetsRequest],
        parse: Callable[[TopicPartition, list[int], str], _R],
    ) -> tuple[dict[TopicPartition, _R], dict[int, BrokerConnectionError]]:
        """``request(tp)`` for every broker-partition, the brokers at the same time, each
        broker's requests pipelined. Returns each answer parsed by ``parse`` (given the
        broker's address), and the brokers that failed with a connection error (their
        answers before the failure are kept)."""
        from kafka_pyspark.client._offsets import offsets_answered

        def ask(broker: int, mine: Sequence[TopicPartition]) -> tuple[
                dict[TopicPartition, _R], BrokerConnectionError | None]:
            conn = self.connection(broker)
            answers, error = offsets_answered(conn, [request(tp) for tp in mine])
            # answers stop at a failure: those of the broker-partitions before it
            answered = zip(mine[: len(answers)], answers, strict=True)
            return {tp: parse(tp, got, conn.address) for tp, got in answered}, error

        return self._gather(tps, ask)

    def _gather(
        self,
        tps: Iterable[TopicPartition],
        ask: Callable[[int, Sequence[TopicPartition]],
                      tuple[dict[TopicPartition, _R], BrokerConnectionError | None]],
    ) -> tuple[dict[TopicPartition, _R], dict[int, BrokerConnectionError]]:
        """``ask(broker, its broker-partitions)`` for every broker of ``tps`` at once
        (:meth:`per_broker`): the answers, and the brokers that failed with their error."""
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            by_broker.setdefault(tp[1], []).append(tp)
        out: dict[TopicPartition, _R] = {}
        down: dict[int, BrokerConnectionError] = {}
        for broker, (found, err) in self.per_broker(by_broker, ask).items():
            out.update(found)
            if err is not None:
                down[broker] = err
        return out, down

    def before_time(self, tp: TopicPartition, time_ms: int) -> int | None:
        """0.7's offset "before" ``time_ms`` (see the module docstring); None if none."""
        return self.before_times([tp], time_ms)[tp]

    def before_time_asked(
        self, tps: Iterable[TopicPartition], time_ms: int | None
    ) -> Callable[[TopicPartition, int], int | None]:
        """:meth:`before_time` for :func:`~.start_end.resolve_starts`: given ``time_ms`` (a
        ``startingTimestamp``), the answers for every broker-partition of ``tps`` are asked
        at once (:meth:`before_times`) and served from there; anything else is asked when
        called."""
        found = {} if time_ms is None else self.before_times(tps, time_ms)

        def before(tp: TopicPartition, t: int) -> int | None:
            if t == time_ms and tp in found:
                return found[tp]
            return self.before_time(tp, t)

        return before
