"""Buffered producing to several brokers, confirmed by the delivery barrier.

``send()`` buffers encoded message sets per broker, as the pieces of the broker's next request
(each item's header, then its set), counted per partition as they come; ``flush()`` writes each
broker's buffer as one MULTIPRODUCE (a PRODUCE for a single message set), then runs the delivery
barrier (:meth:`BrokerConnection.barrier`) on every connection it produced on and returns what
was confirmed. A buffer that would grow past ``max_request_size`` (default 90 MiB, under 0.7.2's
100 MiB ``max.socket.request.bytes``) or past MULTIPRODUCE's item count is written right away
(confirmed at the next ``flush()``), so memory stays bounded by about one request per broker.

Kafka 0.7 PRODUCE has no answer; nothing here is resent once written. Anything not confirmed
is reported in :class:`DeliveryError` (``unconfirmed``/``confirmed`` per
``(topic, broker, partition)``): the caller (a Spark task) fails and is retried, which makes
writes at-least-once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from kafka_pyspark import _wire as wire
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._wire.protocol import MAX_MULTI_ITEMS, MULTIPRODUCE_HEADER_SIZE
from kafka_pyspark.client._appends import AppendLedger, Shortfall
from kafka_pyspark.client._brokers import BrokerConnections, ConnectionSettings
from kafka_pyspark.client._connection import BrokerConnection
from kafka_pyspark.client._framing import BROKER_MAX_REQUEST_BYTES
from kafka_pyspark.client._offsets import latest
from kafka_pyspark.errors import (
    AppendShortfallError,
    DeliveryError,
    KafkaError,
    RequestTooLargeError,
    with_context,
)

DEFAULT_MAX_REQUEST_SIZE = 90 * 1024 * 1024


class DeliveryCount(NamedTuple):
    message_sets: int
    bytes: int


def _add(
    into: dict[TopicPartition, DeliveryCount], key: TopicPartition, sets: int, nbytes: int
) -> None:
    c = into.get(key)
    into[key] = DeliveryCount(sets + (c.message_sets if c else 0), nbytes + (c.bytes if c else 0))


def _merge(
    into: dict[TopicPartition, DeliveryCount], other: Mapping[TopicPartition, DeliveryCount]
) -> None:
    for key, c in other.items():
        _add(into, key, c.message_sets, c.bytes)


class _Pending:
    """A broker's buffered message sets: the items of its next request, laid out as the wire
    has them (per item its head, then its message set), counted per partition as they come."""

    __slots__ = ("counts", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0  # bytes of the items
        self.counts: dict[tuple[str, int], list[int]] = {}  # (topic, partition): [sets, bytes]

    @property
    def items(self) -> int:
        return len(self.parts) // 2

    def count_into(self, into: dict[TopicPartition, DeliveryCount], broker_id: int,
                   ledger: AppendLedger | None = None) -> None:
        """Count the sets into ``into`` and, when given, the broker's append ``ledger`` (once
        per partition, not per message set: a request carries hundreds)."""
        for (topic, partition), (sets, nbytes) in self.counts.items():
            _add(into, (topic, broker_id, partition), sets, nbytes)
            if ledger is not None:
                ledger.add_sent(topic, partition, nbytes)


def _as_tuples(d: Mapping[TopicPartition, DeliveryCount]) -> dict[TopicPartition, tuple[int, int]]:
    return {k: (v.message_sets, v.bytes) for k, v in d.items()}


class Producer(Closing):
    """One connection per broker; buffered sends; ``flush()`` confirms with the barrier."""

    def __init__(
        self,
        brokers: Mapping[int, tuple[str, int]],
        *,
        timeout: float = defaults.SOCKET_TIMEOUT_MS / 1000,
        retries: int = 3,
        backoff: float = 0.2,
        buffer_size: int = defaults.SOCKET_BUFFER_SIZE,
        max_request_size: int = DEFAULT_MAX_REQUEST_SIZE,
        check_appends: float | None = None,
        before_write: Callable[[], None] | None = None,
    ) -> None:
        if not 0 < max_request_size <= BROKER_MAX_REQUEST_BYTES:
            raise ValueError(
                f"max_request_size must be in 1..{BROKER_MAX_REQUEST_BYTES}, "
                f"got {max_request_size}"
            )
        self._conns = BrokerConnections(
            {int(b): (h, int(p)) for b, (h, p) in brokers.items()},
            ConnectionSettings(timeout=timeout, buffer_size=buffer_size, retries=retries,
                               backoff=backoff))
        self._max_request_size = max_request_size
        self._pending: dict[int, _Pending] = {}  # per broker: its next request
        # written, not yet confirmed
        self._sent: dict[int, dict[TopicPartition, DeliveryCount]] = {}
        # check_appends: seconds to wait for a short log growth (_appends.py); None: no check
        self._check_appends = check_appends
        # called before each buffer goes to a socket; raising keeps it unwritten (exactly-once:
        # the writer's lock checked with its store, so an attempt that lost it writes nothing)
        self._before_write = before_write
        self._ledgers: dict[int, AppendLedger] = {}

    @property
    def buffered_bytes(self) -> int:
        """Bytes buffered by ``send()`` and not written yet (all brokers)."""
        return sum(p.size for p in self._pending.values())

    def connection(self, broker_id: int) -> BrokerConnection:
        if broker_id not in self._conns:
            raise ValueError(f"unknown broker id {broker_id} (known: {self._conns.known()})")
        return self._conns.get(broker_id)

    def send(
        self, broker_id: int, topic: str, partition: int, message_set: bytes | memoryview
    ) -> None:
        """Buffer one encoded message set for ``topic``/``partition`` on ``broker_id``.

        A memoryview (the encoder's sets are views of one buffer) is kept, not copied: it must
        stay unchanged until ``flush()``; its bytes are copied once, into the request."""
        if broker_id not in self._conns:
            raise ValueError(f"unknown broker id {broker_id} (known: {self._conns.known()})")
        n = len(message_set)
        if not n:
            return
        head = wire.produce_item_head(topic, partition, n)
        size = len(head) + n
        if MULTIPRODUCE_HEADER_SIZE + size > self._max_request_size:
            raise RequestTooLargeError(
                f"a message set of {n} bytes for topic {topic!r} partition "
                f"{partition} on broker {broker_id} does not fit in one request "
                f"({self._max_request_size} bytes max)"
            )
        pend = self._pending.get(broker_id)
        if pend is not None and (
            MULTIPRODUCE_HEADER_SIZE + pend.size + size > self._max_request_size
            or pend.items >= MAX_MULTI_ITEMS
        ):  # the request is full: written now, confirmed by the next flush()
            self._write_or_fail(broker_id)
            pend = None
        if pend is None:
            pend = self._pending[broker_id] = _Pending()
        pend.parts += (head, message_set)
        pend.size += size
        c = pend.counts.get((topic, partition))
        if c is None:
            pend.counts[(topic, partition)] = [1, n]
        else:
            c[0] += 1
            c[1] += n

    def log_end(self, broker_id: int, topic: str, partition: int) -> int:
        """The partition's log end (OFFSETS latest) asked on the connection later sends use;
        it is also the base of the append check, which then does not ask again."""
        conn = self.connection(broker_id)
        end = latest(conn, topic, partition)
        if self._check_appends is not None:
            ledger = self._ledgers.setdefault(broker_id, AppendLedger())
            if ledger.needs_base(topic, partition):
                ledger.set_base(topic, partition, end, conn.connects)
        return end

    def write_buffered(self) -> None:
        """Write every broker's buffered sets to its socket now (no barrier)."""
        for broker_id in sorted(self._pending):
            self._write_or_fail(broker_id)

    def _write_or_fail(self, broker_id: int) -> None:
        """:meth:`_write`; a failure forgets the broker's state and says what is unconfirmed."""
        try:
            self._write(broker_id)
        except KafkaError as e:
            unconfirmed = self._forget(broker_id)
            raise DeliveryError(
                f"producing to broker {broker_id} failed: {e}; not confirmed: "
                f"{_summary(unconfirmed)}",
                unconfirmed=_as_tuples(unconfirmed),
            ) from e

    def _write(self, broker_id: int) -> None:
        """Write the broker's buffered sets as one request; no barrier."""
        pend = self._pending.pop(broker_id, None)
        if pend is None or not pend.parts:
            return
        try:
            if self._before_write is not None:
                self._before_write()
            conn = self.connection(broker_id)
            if self._check_appends is not None:
                self._ask_bases(conn, broker_id, pend)
        except KafkaError:
            self._pending[broker_id] = pend  # not written: _forget reports them
            raise
        sent = self._sent.setdefault(broker_id, {})
        try:
            if pend.items == 1:
                ((topic, partition),) = pend.counts
                conn.produce(topic, partition, pend.parts[1])
            else:
                conn.multiproduce_items(pend.parts, pend.size,
                                        sum(nbytes for _, nbytes in pend.counts.values()))
        except KafkaError:
            pend.count_into(sent, broker_id)  # (possibly) written: unconfirmed
            raise
        pend.count_into(sent, broker_id, self._ledgers.get(broker_id))

    def _ask_bases(self, conn: BrokerConnection, broker_id: int, pend: _Pending) -> None:
        """The log end before this connection's first set to each partition of ``pend`` (the
        answer precedes the PRODUCEs: one connection's requests are handled in order)."""
        ledger = self._ledgers.setdefault(broker_id, AppendLedger())
        for topic, partition in pend.counts:
            if ledger.needs_base(topic, partition):
                try:
                    end = latest(conn, topic, partition)
                except KafkaError as e:
                    raise with_context(
                        e,
                        then=f" (asking the log end of topic {topic!r} partition "
                        f"{partition} before producing {pend.items} message "
                        "sets: nothing was sent)",
                    ) from e
                ledger.set_base(topic, partition, end, conn.connects)

    def _forget(self, broker_id: int) -> dict[TopicPartition, DeliveryCount]:
        """Drop a broker's state after a failure; returns what it had not confirmed."""
        out = dict(self._sent.pop(broker_id, {}))
        pend = self._pending.pop(broker_id, None)
        if pend is not None:
            pend.count_into(out, broker_id)
        self._ledgers.pop(broker_id, None)
        conn = self._conns.opened(broker_id)
        if conn is not None:
            conn.close()  # forget its own unconfirmed/lost state: reported here, once
        return out

    def flush(self) -> dict[TopicPartition, DeliveryCount]:
        """Write all buffers, run the barrier on every connection produced on.

        Returns the message sets and bytes confirmed per ``(topic, broker, partition)`` since
        the last ``flush()``. Raises :class:`DeliveryError` (listing ``unconfirmed`` and
        ``confirmed``) if any broker could not be written or confirmed; the others are still
        confirmed first. With ``check_appends``, a partition whose log grew by fewer bytes
        than were sent raises :class:`AppendShortfallError` (a :class:`DeliveryError`).
        """
        confirmed: dict[TopicPartition, DeliveryCount] = {}
        unconfirmed: dict[TopicPartition, DeliveryCount] = {}
        failures: list[str] = []
        shortfalls: list[str] = []
        for broker_id in sorted(self._pending):
            try:
                self._write(broker_id)
            except KafkaError as e:
                _merge(unconfirmed, self._forget(broker_id))
                failures.append(f"broker {broker_id}: {e}")
        for broker_id in sorted(self._sent):
            sent = self._sent.pop(broker_id)
            if not sent:
                continue
            topic, partition = _barrier_target(sent)
            try:
                end = self.connection(broker_id).barrier(topic, partition)
                short = self._short_appends(broker_id, (topic, partition), end)
            except KafkaError as e:
                _merge(unconfirmed, sent)
                self.connection(broker_id).close()
                failures.append(f"broker {broker_id}: {e}")
                continue
            for s in short:
                key = (s.topic, broker_id, s.partition)
                unconfirmed[key] = sent.pop(key, DeliveryCount(0, s.sent))
                shortfalls.append(_shortfall_text(broker_id, s, self._check_appends or 0.0))
            _merge(confirmed, sent)
        if shortfalls and not failures:
            raise AppendShortfallError(
                "; ".join(shortfalls),
                unconfirmed=_as_tuples(unconfirmed),
                confirmed=_as_tuples(confirmed),
            )
        failures += shortfalls
        if failures:
            raise DeliveryError(
                "delivery not confirmed; " + "; ".join(failures)
                + f". Not confirmed: {_summary(unconfirmed)}",
                unconfirmed=_as_tuples(unconfirmed),
                confirmed=_as_tuples(confirmed),
            )
        return confirmed

    def _short_appends(
        self, broker_id: int, barrier: tuple[str, int], end: int | None
    ) -> list[Shortfall]:
        """After the barrier: partitions of ``broker_id`` whose log grew less than was sent."""
        ledger = self._ledgers.get(broker_id)
        if ledger is None or self._check_appends is None:
            return []
        conn = self.connection(broker_id)
        known = {barrier: end} if end is not None else {}
        return ledger.check(
            lambda t, p: latest(conn, t, p), known=known, wait=self._check_appends,
            session=conn.connects,
        )

    def close(self) -> None:
        """Close every connection; buffered, unflushed data is discarded."""
        self._pending.clear()
        self._ledgers.clear()
        self._sent.clear()
        self._conns.close()


def _barrier_target(sent: Mapping[TopicPartition, DeliveryCount]) -> tuple[str, int]:
    """A (topic, partition) produced to, with partition >= 0 (OFFSETS for a partition the
    broker lacks closes the connection; PRODUCE to -1 means 'any partition')."""
    for topic, _, partition in sent:
        if partition >= 0:
            return topic, partition
    topic = next(iter(sent))[0]
    return topic, 0


def _shortfall_text(broker_id: int, s: Shortfall, wait: float) -> str:
    head = (
        f"topic {s.topic!r} broker {broker_id} partition {s.partition}: sent {s.sent} bytes "
        f"but the log grew by {s.grown} bytes (log end {s.before} -> {s.after}, still short "
        f"after waiting {wait:g} s for the broker to flush)"
    )
    if s.reconnected:
        return (
            f"{head}, and the connection was re-established in between: the broker may have "
            "restarted and cut a torn tail from its log, or dropped data without an answer; "
            "what it holds cannot be told from the log end (check the topic, or rerun: "
            "at-least-once)"
        )
    return (
        f"{head}: the broker dropped data without an answer. Likely cause: the broker's "
        "max.message.size is smaller than the writer's (a 0.7 broker silently drops a message "
        "set holding a larger message); lower the writer's max.message.size to the broker's. "
        "(A broker that flushes less often than that wait would look the same)"
    )


def _summary(counts: Mapping[TopicPartition, DeliveryCount]) -> str:
    if not counts:
        return "nothing"
    parts = [
        f"{t}/broker {b}/partition {p}: {c.message_sets} message sets, {c.bytes} bytes"
        for (t, b, p), c in sorted(counts.items())
    ]
    return ", ".join(parts)
