"""Boundary scans of a stream's next micro-batch, fetched while the current one runs.

With ``maxBytesPerTrigger``, choosing a micro-batch's ends means walking the message headers of
the byte windows it admits (:mod:`.admission`, ``docs/streaming.md``): the driver fetches about
the bytes the micro-batch will read. Spark asks for the next ends only when the current
micro-batch is done; a fetch made then would sit between micro-batches (its cost:
``docs/streaming.md``). So after a ``latestOffset`` that cut partitions short, the stream reader
starts :class:`Prefetch`: a background thread scans the windows the next micro-batch's first
water-filling round asks for if no data arrives in between
(:meth:`.admission.Limits.first_windows`). The next ``latestOffset`` takes its answers
(:meth:`Prefetch.take`) and asks the brokers only for the windows they do not cover
(:func:`answer_from`).

Correctness never depends on the guess. A prefetched scan answers a window only when it covers
it (the window starts at a boundary the prefetched scan saw and ends inside it) and the log
still holds it (``earliest <= lo`` and ``hi <= latest`` now), and the answer is exactly what
scanning that window would give (:func:`restrict`): the bytes of a 0.7 log below its end never
change. A prefetch that failed is dropped without a word (the scan that then needs the window
reports what is wrong); one still running when the next micro-batch is planned is waited for,
at most ``socket.timeout.ms`` (every request it makes has that timeout), then dropped.
The prefetch thread and its connections (its own, never the OFFSETS ones) live from
micro-batch to micro-batch; :meth:`Prefetch.close` (the reader's ``stop()``) ends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING

import numpy as np

from kafka_pyspark._shared.partition_key import TopicPartition, describe_tp
from kafka_pyspark._spark.read.log_bounds import LogBounds, OffsetLookup
from kafka_pyspark._spark.stream.scan import HEADER, Scan, Windows, scan_window
from kafka_pyspark.errors import BrokerConnectionError, KafkaError, MessageError, with_context

if TYPE_CHECKING:
    from kafka_pyspark._cluster import BrokerAddress, ClusterOptions
    from kafka_pyspark.client import BrokerConnection

__all__ = [
    "THREAD_NAME",
    "Prefetch",
    "Scanned",
    "answer_from",
    "restrict",
    "scan_windows",
]

log = logging.getLogger(__name__)

#: the prefetch thread's name (then ``_0``)
THREAD_NAME = "kafka07-stream-prefetch"

Scanned = dict[TopicPartition, tuple[int, int, Scan]]
"""``{tp: (lo, hi, scan of [lo, hi))}``."""
_Items = list[tuple[TopicPartition, int, int]]  # one broker's windows: (tp, lo, hi)


def scan_windows(
    lookup: OffsetLookup, windows: Windows, *, quiet: bool = False
) -> dict[TopicPartition, Scan]:
    """Header-only scans of byte windows: one MULTIFETCH per broker on ``lookup``'s
    connections, the brokers at the same time
    (:meth:`~kafka_pyspark._spark.read.log_bounds.OffsetLookup.per_broker`), no decoding. A broker
    that does not answer, or answers a window with an error code, leaves its windows out (warned
    unless ``quiet``); a window whose headers are impossible raises."""
    by_broker: dict[int, _Items] = {}
    for tp, (lo, hi) in sorted(windows.items()):
        by_broker.setdefault(tp[1], []).append((tp, lo, hi))

    def scan(broker: int, items: _Items) -> dict[TopicPartition, Scan]:
        return _scan_broker(lookup.connection, broker, items, quiet)

    out: dict[TopicPartition, Scan] = {}
    for found in lookup.per_broker(by_broker, scan).values():
        out.update(found)
    return out


def _scan_broker(
    connection: Callable[[int], BrokerConnection],
    broker: int,
    items: _Items,
    quiet: bool,
) -> dict[TopicPartition, Scan]:
    """One broker's windows of :func:`scan_windows`, in one MULTIFETCH."""
    from kafka_pyspark import _wire as wire

    fetches = [wire.FetchRequest(tp[0], tp[2], lo, hi - lo) for tp, lo, hi in items]
    try:
        answers = connection(broker).multifetch(fetches)
    except BrokerConnectionError as e:
        if not quiet:
            log.warning("kafka07 stream: broker %d did not answer a boundary scan (%s); "
                        "its partitions wait for the next micro-batch", broker, e)
        return {}
    out: dict[TopicPartition, Scan] = {}
    for (tp, lo, hi), answer in zip(items, answers, strict=True):
        if answer.error != 0:
            if not quiet:
                log.warning("kafka07 stream: %s: boundary scan at %d answered error %d; "
                            "the partition waits for the next micro-batch",
                            describe_tp(tp), lo, answer.error)
            continue
        try:
            out[tp] = scan_window(answer.messages, lo)
        except MessageError as e:
            raise with_context(
                e,
                f"{describe_tp(tp)}: scanning message headers in [{lo}, {hi}) to cut "
                "the micro-batch at a message boundary (maxBytesPerTrigger)",
                then=". Is the stream offset a message boundary?",
            ) from e
    return out


def restrict(scanned: tuple[int, int, Scan], lo: int, hi: int) -> Scan | None:
    """What a scan of ``[lo, hi)`` finds, from a scan of a window around it; None unless
    ``lo`` is a boundary that scan saw and ``hi`` is inside its window."""
    _, top, sc = scanned
    b = sc.boundaries
    i = int(np.searchsorted(b, lo))
    if hi > top or hi < lo or i == len(b) or int(b[i]) != lo:
        return None
    j = int(np.searchsorted(b, hi, side="right"))
    inside = b[i:j]
    last = int(inside[-1])
    next_size = None
    if last + HEADER <= hi:  # the length field of the message at ``last`` is in the window
        next_size = int(b[j]) - last if j < len(b) else sc.next_size
    return Scan(inside, next_size)


def answer_from(
    scanned: Scanned, windows: Windows, bounds: Mapping[TopicPartition, LogBounds]
) -> tuple[dict[TopicPartition, Scan], dict[TopicPartition, tuple[int, int]]]:
    """The windows prefetched scans answer, and the ones left to scan."""
    hits: dict[TopicPartition, Scan] = {}
    misses: dict[TopicPartition, tuple[int, int]] = {}
    for tp, (lo, hi) in windows.items():
        have = scanned.get(tp)
        b = bounds.get(tp)
        found = None
        if have is not None and b is not None and b.earliest <= have[0] and have[1] <= b.latest:
            found = restrict(have, lo, hi)
        if found is None:
            misses[tp] = (lo, hi)
        else:
            hits[tp] = found
    return hits, misses


class Prefetch:
    """At most one background scan at a time (see the module docstring), on one long-lived
    thread with its own connections (one per broker, kept from scan to scan)."""

    def __init__(self, options: ClusterOptions) -> None:
        self._options = options
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=THREAD_NAME)
        # the connections the next scan uses; a scan given up on keeps (and closes) its own,
        # so two scans never share one
        self._lookup: OffsetLookup | None = None
        self._running: tuple[Future[Scanned], OffsetLookup] | None = None
        self._given_up = False  # a scan was given up on (the thread may still run it)
        self.started = 0  # prefetches started (tests, debugging)

    def start(self, brokers: Mapping[int, BrokerAddress], windows: Windows) -> None:
        """Scan ``windows`` in the background (a running prefetch is waited for first)."""
        self.take()
        if not windows:
            return
        lookup = self._lookup
        if lookup is None:
            lookup = self._lookup = OffsetLookup(brokers, self._options)
        else:
            lookup.update(brokers)
        self._running = (self._thread.submit(_prefetch, lookup, dict(windows)), lookup)
        self.started += 1

    def take(self) -> Scanned:
        """The finished prefetch's scans (empty if none, or if it failed or is still running
        after ``socket.timeout.ms``); the prefetch is over either way."""
        running, self._running = self._running, None
        if running is None:
            return {}
        future, lookup = running
        try:
            return future.result(self._options.socket_timeout_ms / 1000)
        except FutureTimeout:
            self._lookup = None  # still in use: closed when that scan ends
            future.add_done_callback(lambda _: lookup.close())
            self._given_up = True
            return {}

    def close(self) -> None:
        """Ends the thread and the connections; a scan still running after
        ``socket.timeout.ms`` is not waited for (it ends at its own timeouts)."""
        self.take()
        self._thread.shutdown(wait=not self._given_up)
        lookup, self._lookup = self._lookup, None
        if lookup is not None:
            lookup.close()


def _prefetch(lookup: OffsetLookup, windows: Windows) -> Scanned:
    """One prefetch's scans; a failure drops them (the scan that needs them reports it)."""
    try:
        found = scan_windows(lookup, windows, quiet=True)
    except (KafkaError, OSError) as e:
        log.debug("kafka07 stream: prefetched boundary scan dropped: %s", e)
        return {}
    return {tp: (*windows[tp], sc) for tp, sc in found.items()}
