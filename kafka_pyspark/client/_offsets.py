"""OFFSETS lookups with 0.7 semantics (docs/dev/PROTOCOL.md "OFFSETS", "Measured: OFFSETS").

A 0.7 OFFSETS answer lists, newest first, the start offset of every segment last modified
before ``time``, preceded by the log end when the last segment is not empty; ``-1`` (latest)
includes everything, ``-2`` (earliest) gives the first segment's start. "Latest" is the
*flushed* end: a 0.7 broker serves and reports only flushed bytes.

Caution: a 0.7.2 broker closes the connection instead of answering OFFSETS for a partition it
does not have. Ask only for partitions known to exist (from the registry or
:func:`~kafka_pyspark.client.probe_partition_count`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from kafka_pyspark import _wire as wire
from kafka_pyspark.client._connection import BrokerConnection
from kafka_pyspark.errors import BrokerConnectionError, ProtocolError

#: Enough for any real log: 0.7 segments are 512 MiB-1 GiB each.
DEFAULT_MAX_SEGMENTS = 1 << 20


class SegmentStarts(NamedTuple):
    """Segment start offsets (ascending) and the log's (flushed) end."""

    starts: list[int]
    end: int

    @property
    def earliest(self) -> int:
        """What OFFSETS earliest answers: the oldest segment start (the end for an empty
        log)."""
        return self.starts[0] if self.starts else self.end


_NAMES = {wire.OFFSETS_EARLIEST: "earliest", wire.OFFSETS_LATEST: "latest"}


def log_bound_request(topic: str, partition: int, time: int) -> wire.OffsetsRequest:
    """OFFSETS for one offset: ``time`` :data:`~kafka_pyspark._wire.OFFSETS_EARLIEST` asks
    what :func:`earliest` answers, :data:`~kafka_pyspark._wire.OFFSETS_LATEST` :func:`latest`."""
    return wire.OffsetsRequest(topic, partition, time, 1)


def parse_log_bound(got: list[int], address: str, req: wire.OffsetsRequest) -> int:
    """The offset answered to :func:`log_bound_request` (``address``: the broker)."""
    if not got:
        raise ProtocolError(
            f"{address}: OFFSETS {_NAMES.get(req.time, req.time)} for topic {req.topic!r} "
            f"partition {req.partition} answered no offset"
        )
    return got[0]


def _bound(conn: BrokerConnection, topic: str, partition: int, time: int) -> int:
    req = log_bound_request(topic, partition, time)
    return parse_log_bound(conn.offsets(topic, partition, time, 1), conn.address, req)


def earliest(conn: BrokerConnection, topic: str, partition: int) -> int:
    """The first offset still on the broker (0 for an unknown topic or unwritten partition)."""
    return _bound(conn, topic, partition, wire.OFFSETS_EARLIEST)


def latest(conn: BrokerConnection, topic: str, partition: int) -> int:
    """The log end the broker serves: the offset the next message will get, once flushed."""
    return _bound(conn, topic, partition, wire.OFFSETS_LATEST)


def segment_starts_request(
    topic: str, partition: int, max_number: int = DEFAULT_MAX_SEGMENTS
) -> wire.OffsetsRequest:
    """The OFFSETS request :func:`segment_starts` sends (for pipelining many of them)."""
    return wire.OffsetsRequest(topic, partition, wire.OFFSETS_LATEST, max_number)


def parse_segment_starts(got: list[int], address: str, topic: str,
                         partition: int) -> SegmentStarts:
    """The answer to :func:`segment_starts_request` (``address``: the broker, for errors)."""
    if not got:
        raise ProtocolError(
            f"{address}: OFFSETS latest for topic {topic!r} partition {partition} "
            "answered no offset"
        )
    end = got[0]
    starts = sorted({o for o in got[1:] if o < end})
    return SegmentStarts(starts, end)


def offsets_answered(
    conn: BrokerConnection, requests: Sequence[wire.OffsetsRequest]
) -> tuple[list[list[int]], BrokerConnectionError | None]:
    """The answers to ``requests``, pipelined on the one connection
    (:meth:`~kafka_pyspark.client.BrokerConnection.offsets_pipelined`: a round trip per window
    of requests, not per request). A connection lost for good ends it: then the answers of
    the requests before the failure, and the error; any other error is raised."""
    answers: list[list[int]] = []
    try:
        conn.offsets_pipelined(requests, answers)
    except BrokerConnectionError as e:
        return answers, e
    return answers, None


def segment_starts_of(
    conn: BrokerConnection, asked: Sequence[tuple[str, int]]
) -> tuple[list[SegmentStarts], BrokerConnectionError | None]:
    """:func:`segment_starts` of each ``(topic, partition)``, pipelined
    (:func:`offsets_answered`: on a lost connection, those before it and the error)."""
    answers, error = offsets_answered(conn, [segment_starts_request(t, p) for t, p in asked])
    return [parse_segment_starts(got, conn.address, t, p)
            for (t, p), got in zip(asked[: len(answers)], answers, strict=True)], error


def segment_starts(
    conn: BrokerConnection, topic: str, partition: int, *, max_number: int = DEFAULT_MAX_SEGMENTS
) -> SegmentStarts:
    """Every segment start (ascending, excluding the end itself) and the log end.

    OFFSETS(latest, max_number) answers ``[end, start_n, ..., start_0]``. When the newest
    segment is empty (just rolled) its start *is* the end and appears once. Segment starts are
    message boundaries, the only places a range may be split. With more segments than
    ``max_number`` the oldest starts are missing.
    """
    got = conn.offsets(topic, partition, wire.OFFSETS_LATEST, max_number)
    return parse_segment_starts(got, conn.address, topic, partition)


def before_time_request(topic: str, partition: int, time_ms: int) -> wire.OffsetsRequest:
    """The OFFSETS request :func:`before_time` sends (for pipelining many of them)."""
    if time_ms < 0:
        raise ValueError(f"time_ms must be >= 0 (epoch milliseconds), got {time_ms}")
    return wire.OffsetsRequest(topic, partition, time_ms, 1)


def before_time(conn: BrokerConnection, topic: str, partition: int, time_ms: int) -> int | None:
    """The newest segment start (or the log end) last modified before ``time_ms``.

    0.7 knows time only per segment file: this is where to start reading to get everything
    written after ``time_ms`` (and possibly some earlier messages of that segment). ``None``
    when no segment was modified before that time (read from the earliest offset instead).
    """
    req = before_time_request(topic, partition, time_ms)
    got = conn.offsets(req.topic, req.partition, req.time, req.max_number)
    return got[0] if got else None
