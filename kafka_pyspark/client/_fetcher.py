"""Reading offset ranges: the FETCH/MULTIFETCH loop, partial tails, fetch-size doubling.

One range is ``(topic, partition, start, end)`` on one broker: every message whose offset is
``start <= offset < end``; a message that starts before ``end`` is read whole, messages that
start at or after ``end`` are left out (the decoder's ``stop_at``). Per round trip:

- FETCH ``max_size`` bytes at the current offset (never more than the fetch size, and never
  more than the rest of the range, since ranges normally end at message boundaries);
- error 1 -> :class:`OffsetOutOfRangeError`, 3 -> :class:`WrongPartitionError`, any other
  non-zero code -> its typed :class:`BrokerError`, all naming topic, broker, partition, offset;
- complete messages -> yield the :class:`~kafka_pyspark._messages.DecodeResult`, continue at its
  ``next_offset`` (a partial message at the end of the answer is simply fetched again);
- no complete message in a full answer: the first message is larger than the request, so the
  size doubles (straight to the first doubling that holds the announced message size) up to
  ``max_fetch_size``, else :class:`FetchSizeTooSmallError`; after that fetch the size returns
  to ``fetch_size``, so memory stays bounded by the fetch size, never by the range;
- a short answer (less than asked for) ending inside its first message: the offset is not
  a message boundary (a broker appends and flushes whole message sets):
  :class:`InvalidMessageSizeError` at once;
- an empty answer before ``end``: see below.

Empty answers. A 0.7 broker does not cross a segment boundary within one FETCH, but a FETCH at
a segment's end is served from the next segment (0.7.2's ``Log.findRange`` maps the offset to
the segment that starts there; docs/dev/PROTOCOL.md "FETCH"), so a segment end never yields an
empty answer. A 0.7.2 broker answers an empty set only at the end of the data it serves, and it
serves only *flushed* bytes (docs/dev/PROTOCOL.md "Measured: visibility and ordering"). An empty
answer before ``end`` therefore means that the data up to ``end`` is not visible yet (not flushed),
or that ``end`` lies beyond the log. Looping until it appears could hang forever, so the fetch is
retried ``empty_retries`` times (default: the connection's ``retries``) with exponential backoff
from the connection's ``backoff``, and then :class:`DataNotAvailableError` is raised, naming the
broker's current latest (flushed) offset. Ranges planned from OFFSETS latest (which *is* the flushed
end) never hit this.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from kafka_pyspark import _wire as wire
from kafka_pyspark._wire.protocol import MAX_MULTI_ITEMS
from kafka_pyspark.client._connection import BrokerConnection
from kafka_pyspark.client._fetch_types import FetchSettings, OffsetRange
from kafka_pyspark.errors import (
    BrokerConnectionError,
    BrokerError,
    DataNotAvailableError,
    FetchSizeTooSmallError,
    InvalidMessageSizeError,
    MessageError,
    OffsetOutOfRangeError,
    ProtocolError,
    WrongPartitionError,
    for_code,
    with_context,
)

if TYPE_CHECKING:
    from kafka_pyspark._messages import DecodeResult
    from kafka_pyspark._messages.flat import ValueSink


#: the settings of a read that names none (frozen: one value serves every call)
_DEFAULT = FetchSettings()


class _RangeReader:
    """State and per-answer logic of one range; shared by FETCH and MULTIFETCH loops."""

    __slots__ = (
        "attempts_empty",
        "conn",
        "empty_retries",
        "end",
        "first_empty",
        "grown",
        "offset",
        "partition",
        "retry_at",
        "settings",
        "sink",
        "size",
        "topic",
    )

    def __init__(
        self,
        conn: BrokerConnection,
        where: tuple[str, int, int, int],
        settings: FetchSettings,
        sink: ValueSink | None,
    ) -> None:
        topic, partition, start, end = where
        if start < 0 or end < start:
            raise ValueError(f"bad range for topic {topic!r} partition {partition}: "
                             f"[{start}, {end})")
        self.conn = conn
        self.settings = settings
        self.sink = sink
        self.empty_retries = (
            conn.retries if settings.empty_retries is None else settings.empty_retries
        )
        self.topic = topic
        self.partition = partition
        self.offset = start
        self.end = end
        self.size = settings.fetch_size
        self.grown = False
        self.attempts_empty = 0
        self.first_empty = 0.0
        self.retry_at = 0.0

    @property
    def done(self) -> bool:
        return self.offset >= self.end

    def where(self) -> str:
        broker = "?" if self.conn.broker_id is None else str(self.conn.broker_id)
        return (
            f"topic {self.topic!r}, broker {broker}, partition {self.partition}, "
            f"offset {self.offset}"
        )

    def request(self) -> wire.FetchRequest:
        """The next FETCH; asks for no more than the rest of the range (unless doubling)."""
        size = self.size if self.grown else min(self.settings.fetch_size, self.end - self.offset)
        return wire.FetchRequest(self.topic, self.partition, self.offset, size)

    def handle(self, resp: wire.FetchResponse, requested: int) -> DecodeResult | None:
        """Process one answer: a result to yield, or None (fetch again; see ``retry_at``)."""
        if resp.error != 0:
            self._raise_code(resp.error)
        body = resp.messages
        if len(body) == 0:
            self._stalled("the broker answered an empty message set")
            return None
        from kafka_pyspark._messages import decode_message_set

        try:
            result = decode_message_set(
                body,
                self.offset,
                verify_crc=self.settings.verify_crc,
                max_decompressed_size=self.settings.max_decompressed_size,
                stop_at=self.end,
                sink=self.sink,
            )
        except MessageError as e:
            raise with_context(e, f"{self.where()} on {self.conn.address}") from e
        if result.bytes_consumed > 0:
            if result.next_offset <= self.offset:  # pragma: no cover - decoder invariant
                raise ProtocolError(f"{self.where()}: decoder made no progress")
            self.offset = result.next_offset
            self.size = self.settings.fetch_size
            self.grown = False
            self.attempts_empty = 0
            return result
        # No complete message in the answer.
        needed = result.partial_size
        if len(body) < requested:
            # The broker sent all it serves and that ends inside the first "message". A broker
            # appends and flushes whole message sets, so the offset is not a message boundary
            # (or the log is corrupt); waiting would not help.
            size = f"announces {needed} bytes" if needed is not None else "has no whole length"
            raise InvalidMessageSizeError(
                f"{self.where()} on {self.conn.address}: the message there {size}, but the "
                f"broker's data ends {len(body)} bytes after the offset: the offset is not the "
                "start of a message (offsets must come from OFFSETS answers or a previous "
                "message's next_offset), or the log is corrupt",
                offset=self.offset,
            )
        self._grow(requested, needed)
        return None

    def _raise_code(self, code: int) -> None:
        where = f"{self.where()} on {self.conn.address}"
        if code == OffsetOutOfRangeError.code:
            raise OffsetOutOfRangeError(
                f"{where}: the offset is not in the broker's log (deleted by retention, or "
                "past its end)"
            )
        if code == WrongPartitionError.code:
            raise WrongPartitionError(f"{where}: the broker has no such partition")
        cls = for_code(code)
        raise cls(where, code=code)

    def _grow(self, requested: int, needed: int | None) -> None:
        size_note = f"{needed} bytes" if needed is not None else "more than 4 bytes"
        hint = (
            " (if the offset is not the start of a message, that size is garbage: offsets "
            "must come from OFFSETS answers or a previous message's next_offset)"
        )
        ceiling = self.settings.max_fetch_size
        if (needed is not None and needed > ceiling) or requested >= ceiling:
            raise FetchSizeTooSmallError(
                f"{self.where()} on {self.conn.address}: the message there is {size_note}, "
                f"larger than max.fetch.size ({ceiling} bytes){hint}"
            )
        new = max(requested, 1) * 2
        while needed is not None and new < needed:
            new *= 2
        self.size = min(new, ceiling)
        self.grown = True

    def _stalled(self, what: str) -> None:
        now = time.monotonic()
        if self.attempts_empty == 0:
            self.first_empty = now
        self.attempts_empty += 1
        if self.attempts_empty > self.empty_retries:
            raise DataNotAvailableError(
                f"{self.where()} on {self.conn.address}: no complete message before the range "
                f"end {self.end}: {what} ({self.attempts_empty} fetches over "
                f"{now - self.first_empty:.1f} s). A 0.7 broker serves only flushed data "
                f"(log.flush.interval), or the end is beyond the log; "
                f"{self._latest_note()}"
            )
        self.retry_at = now + self.conn.backoff * (2 ** (self.attempts_empty - 1))

    def _latest_note(self) -> str:
        try:
            latest = self.conn.offsets(self.topic, self.partition, wire.OFFSETS_LATEST, 1)
        except (BrokerError, BrokerConnectionError, ProtocolError) as e:
            return f"asking for the latest offset failed too: {e}"
        if not latest:
            return "the broker reports no latest offset"
        return f"the broker's latest (flushed) offset is {latest[0]}"


def _wait_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def iter_range(
    conn: BrokerConnection,
    topic: str,
    partition: int,
    start: int,
    end: int,
    settings: FetchSettings = _DEFAULT,
    *,
    sink: ValueSink | None = None,
) -> Iterator[DecodeResult]:
    """Yield every message with ``start <= offset < end`` of the connection's broker as
    decoded results, in order.

    See the module docstring for the loop, the fetch-size doubling and empty answers, and
    :func:`iter_multi_range` for ``settings`` and ``sink``. Errors name the connection's
    ``broker_id``.
    """
    reader = _RangeReader(conn, (topic, partition, start, end), settings, sink)
    for _, result in _read(conn, [reader], settings):
        yield result


def iter_multi_range(
    conn: BrokerConnection,
    ranges: Sequence[OffsetRange],
    settings: FetchSettings = _DEFAULT,
    *,
    sink: ValueSink | None = None,
) -> Iterator[tuple[int, DecodeResult]]:
    """Read several ranges of the connection's broker; yield ``(range_index, result)``.

    Same semantics per range as :func:`iter_range`. Each round trip fetches every range that
    is not finished and not waiting out an empty answer, as many as fit in
    ``settings.max_response_size`` bytes (default ``max_fetch_size``; at least one range per
    request): FETCH for one, MULTIFETCH for several. Memory stays bounded by that, not by the
    number of ranges. Results of one range come in offset order; ranges interleave. ``sink``:
    the decoder's (``decode_message_set``). Errors name the connection's ``broker_id``.
    """
    where = [(r.topic, r.partition, r.start, r.end) for r in ranges]
    yield from _read(conn, [_RangeReader(conn, w, settings, sink) for w in where], settings)


def _read(
    conn: BrokerConnection, readers: Sequence[_RangeReader], settings: FetchSettings
) -> Iterator[tuple[int, DecodeResult]]:
    """The FETCH/MULTIFETCH loop over ``readers`` (the ranges' read positions)."""
    if not 1 <= settings.fetch_size <= settings.max_fetch_size <= wire.INT32_MAX:
        raise ValueError(
            f"need 1 <= fetch_size ({settings.fetch_size}) <= max_fetch_size "
            f"({settings.max_fetch_size}) <= {wire.INT32_MAX}"
        )
    limit = settings.max_fetch_size
    if settings.max_response_size is not None:
        limit = settings.max_response_size
    active = [i for i, r in enumerate(readers) if not r.done]
    while active:
        batch = _next_requests(readers, active, limit)
        if not batch:
            _wait_until(min(readers[i].retry_at for i in active))
            continue
        answers = _round_trip(conn, batch)
        for (i, req), resp in zip(batch, answers, strict=True):
            result = readers[i].handle(resp, req.max_size)
            if result is not None:
                yield i, result
        del answers, resp  # no view of the transport's receive buffer is left (its reuse)
        active = [i for i in active if not readers[i].done]


def _next_requests(
    readers: Sequence[_RangeReader], active: Sequence[int], limit: int
) -> list[tuple[int, wire.FetchRequest]]:
    """The next round trip: the ranges not waiting out an empty answer, in order, as many as
    fit in ``limit`` bytes (at least one; none when all are waiting)."""
    now = time.monotonic()
    batch: list[tuple[int, wire.FetchRequest]] = []
    total = 0
    for i in active:
        if readers[i].retry_at > now:
            continue
        req = readers[i].request()
        if batch and (total + req.max_size > limit or len(batch) >= MAX_MULTI_ITEMS):
            break
        batch.append((i, req))
        total += req.max_size
    return batch


def _round_trip(
    conn: BrokerConnection, batch: Sequence[tuple[int, wire.FetchRequest]]
) -> list[wire.FetchResponse]:
    """FETCH for one request, MULTIFETCH for several."""
    if len(batch) == 1:
        req = batch[0][1]
        return [conn.fetch(req.topic, req.partition, req.offset, req.max_size)]
    return conn.multifetch([req for _, req in batch])


def probe_partition_count(conn: BrokerConnection, topic: str, *, limit: int = 1024) -> int:
    """How many partitions ``topic`` has on this broker, by FETCH (offset 0, max size 0).

    Partitions 0, 1, 2, ... are fetched until the broker answers WrongPartition (3); the
    first such partition number is the count. FETCH, not OFFSETS: a real 0.7.2 broker closes
    the connection instead of answering OFFSETS for a partition it does not have
    (docs/dev/PROTOCOL.md "Measured: OFFSETS"), which is indistinguishable from a network failure,
    while a FETCH answers error 3 cleanly and with max size 0 carries no data. OffsetOutOfRange (a
    log whose start was deleted) still means the partition exists. An unknown topic answers with the
    broker's default partition count (``num.partitions``), as 0.7.2 would create it.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    for partition in range(limit):
        resp = conn.fetch(topic, partition, 0, 0)
        if resp.error == WrongPartitionError.code:
            return partition
        if resp.error not in (0, OffsetOutOfRangeError.code):
            cls = for_code(resp.error)
            raise cls(
                f"probing topic {topic!r} partition {partition} on {conn.address}",
                code=resp.error,
            )
    raise ProtocolError(
        f"{conn.address}: topic {topic!r} answered FETCH for partitions 0..{limit - 1} without "
        "WrongPartition; more partitions than the probe limit"
    )
