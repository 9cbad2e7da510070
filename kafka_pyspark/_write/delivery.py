"""Exactly-once delivery of one task's message sets (docs/writing.md "Exactly once").

:class:`ExactlyOnce` sits between the :class:`~.sets.SetBuilder` and the producer:

1. :meth:`~ExactlyOnce.start` sends the claim of the task's lock to the store (:mod:`.store`)
   when its first rows arrive; the task reads more input meanwhile (it routes none before the
   answer: an earlier attempt's partition lists would change where rows go).
   :meth:`~ExactlyOnce.begin`: take the lock, waiting up to ``delivery.lock.timeout.ms``; a
   ``done`` record ends the task there (nothing is sent, its
   commit message is returned again). Intent records of an earlier attempt: read each of their
   broker-partitions back from the recorded start and count the recorded sets that landed
   (:mod:`.matcher`), polling until all are found or ``delivery.visibility.wait.ms`` has passed
   since the lock was taken (0.7 serves only flushed bytes).
2. :meth:`~ExactlyOnce.add` per set: a set an earlier attempt recorded must be the same
   (else :class:`~kafka_pyspark.errors.NonDeterministicInputError`); if it landed it is
   skipped, else sent. A new set waits in a window (:data:`WINDOW_BYTES`). A full window is
   sealed: the log end of its broker-partitions new to the task, then its intent record, sent
   to the store at once and confirmed while the task encodes on; the sealed window is sent as
   soon as the store has answered (looked at each time sets are added; at the latest when the
   next window is sealed, or at the end), so the store's round trip (a ZooKeeper write: a disk
   sync on the server) costs the task no time, and a task holds about one window, not two.
3. After the delivery barrier (the task's), :meth:`~ExactlyOnce.finish` writes ``done`` and
   releases the lock.

Before sending, the holder checks it still holds its lock (ZooKeeper: the same session): one
whose session was lost stops.
"""

from __future__ import annotations

import contextlib
import os
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, TypeVar

from kafka_pyspark._options.delivery_options import DeliveryOptions
from kafka_pyspark._shared.partition_key import TopicPartition, partition_key
from kafka_pyspark._wire.topics import MAX_TOPIC_BYTES
from kafka_pyspark._write.digest import LogUnit, SetDigest, log_units
from kafka_pyspark._write.faults import FAULT_ENV, fault_point
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.matcher import landed_prefix
from kafka_pyspark._write.records import (
    INTENT_SET_SIZE,
    DoneRecord,
    IntentWindow,
    RecordError,
    decode_done,
    decode_intent,
    encode_done,
    encode_intent,
    intent_target_size,
    per_target,
)
from kafka_pyspark._write.rows import Targets
from kafka_pyspark._write.store import DONE, PendingClaim, Recording, RecordStore, intent_name
from kafka_pyspark.client import latest
from kafka_pyspark.errors import (
    DeliveryLockError,
    KafkaError,
    NonDeterministicInputError,
    raise_for_code,
    with_context,
)

if TYPE_CHECKING:
    from kafka_pyspark.client import Producer

__all__ = ["WINDOW_BYTES", "WINDOW_RECORD_BYTES", "ExactlyOnce"]

#: most message-set bytes buffered before a window's intent is recorded and it is sent (a task
#: holds up to two: one being recorded, one filling; one and a bit once the store answers within
#: an encoder call); docs/writing.md "Exactly once" has the measurements behind the size
WINDOW_BYTES = 16 << 20
#: most bytes of one intent record (one ZooKeeper node; ZooKeeper's limit is about 1 MiB)
WINDOW_RECORD_BYTES = 768 << 10
_READ_FIRST = 1 << 20
_READ_MAX = 128 << 20
_POLL_S = 0.25

Send = Callable[[list[int], list[bytes | memoryview], list[int]], None]
"""send(targets, message sets, messages in each): hand sets to the producer, in order"""
#: most intent-record bytes one set can add: its entry, and its target's if new to the window
_SET_RECORD_MAX = INTENT_SET_SIZE + intent_target_size("t" * MAX_TOPIC_BYTES)
_R = TypeVar("_R")


@dataclass
class _Window:
    """Sets waiting for their intent record, as parallel lists (a task makes thousands of
    sets: no object per set beyond its digest)."""

    targets: list[int] = field(default_factory=list)
    sets: list[bytes | memoryview] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    digests: list[SetDigest] = field(default_factory=list)
    nbytes: int = 0
    #: bytes of its intent record so far
    record: int = 0
    #: its targets, in first-use order
    keys: dict[int, None] = field(default_factory=dict)

    def full(self) -> bool:
        return self.nbytes >= WINDOW_BYTES or self.record >= WINDOW_RECORD_BYTES


class ExactlyOnce:
    """The protocol for one task attempt. Not thread-safe."""

    def __init__(
        self, store: RecordStore, ident: TaskIdentity, opts: DeliveryOptions, targets: Targets,
        send: Send, producer: Callable[[], Producer],
        landed_earlier: Callable[[int, int, int], None], decompress_limit: int,
    ) -> None:
        self.store, self.ident, self.opts, self.targets = store, ident, opts, targets
        self._send, self._producer, self._landed_earlier = send, producer, landed_earlier
        self._limit = decompress_limit
        #: the last sentence of a delivery error (what happens next)
        self.retry_note = ""
        self._starts: dict[TopicPartition, int] = {}
        self._recorded: dict[TopicPartition, list[SetDigest]] = {}
        self._landed: dict[TopicPartition, int] = {}
        self._index: dict[TopicPartition, int] = {}  # sets generated so far per target
        self._next_window = 0
        self._window = _Window()
        #: the window whose intent is being recorded, sent once it is (at most one)
        self._sealed: tuple[_Window, Recording] | None = None
        #: the claim sent by start(), answered by begin()
        self._claiming: PendingClaim | None = None
        self._held = False
        self._done = False  # this attempt wrote the done record
        self._found_done = False  # an earlier attempt had
        #: the lists the earlier attempts routed over (the router takes them)
        self.pinned: dict[str, tuple[tuple[int, int], ...]] = {}
        #: -> the lists resolved since the last window (recorded with it)
        self.resolved: Callable[[], dict[str, tuple[tuple[int, int], ...]]] = dict

    # --- the protocol ------------------------------------------------------------------------

    def start(self) -> None:
        """Send the claim of the lock (:meth:`begin` waits for its answer): the task reads
        input meanwhile."""
        if self._claiming is None:
            self._claiming = self.store.start_claim(self.ident,
                                                    self.opts.lock_timeout_ms / 1000.0)

    def claim_answered(self) -> bool:
        """Whether the store has answered the claim :meth:`start` sent (then :meth:`begin`
        does not wait for it, unless an earlier attempt left its node)."""
        return self._claiming is not None and self._claiming.ready()

    def begin(self) -> DoneRecord | None:
        """Take the lock; the done record if the task is done, else None (go on writing)."""
        self.start()
        assert self._claiming is not None
        claiming, self._claiming = self._claiming, None
        claim = claiming()
        visible_by = time.monotonic() + self.opts.visibility_wait_ms / 1000.0
        if claim.done is not None:
            self._found_done = True
            return self._decode(decode_done, claim.done, "done")
        self._held = True
        windows = [self._decode(decode_intent, b, "intent") for b in claim.intents]
        self._next_window = len(windows)
        self._starts, self._recorded, self.pinned = per_target(windows)
        if self._recorded:
            self._landed = self._read_back(visible_by)
        return None

    def add(self, targets: list[int], sets: list[bytes | memoryview], counts: list[int],
            digests: list[SetDigest]) -> None:
        """Message sets, in the order the task makes them (one list entry per set). Then the
        sealed window goes as soon as the store has answered its intent: a task holds about
        one window, not two."""
        if not self._recorded:  # the first attempt: every set is new to the store
            self._append(targets, sets, counts, digests)
        else:
            for one in zip(targets, sets, counts, digests, strict=True):
                self._add_one(*one)
        if self._sealed is not None and self._sealed[1].ready():
            self._send_sealed()

    def _add_one(self, target: int, data: bytes | memoryview, messages: int,
                 digest: SetDigest) -> None:
        """One set of an attempt after an earlier one: matched against its recorded sets."""
        key = self.targets[target]
        i = self._index.get(key, 0)
        self._index[key] = i + 1
        recorded = self._recorded.get(key, ())
        if i < len(recorded):
            if recorded[i] != digest:
                raise self._differs(key, f"its message set {i + 1} is {_fmt(digest)}, the "
                                         f"earlier attempt's was {_fmt(recorded[i])}")
            if i < self._landed.get(key, 0):
                self._landed_earlier(target, messages, len(data))
                return
            self._fence()
            self._send([target], [data], [messages])
            return
        self._append([target], [data], [messages], [digest])

    def _append(self, targets: list[int], sets: list[bytes | memoryview], counts: list[int],
                digests: list[SetDigest]) -> None:
        """New sets into the window, sealed as soon as it holds ``WINDOW_BYTES`` or its record
        ``WINDOW_RECORD_BYTES`` (taken in slices that cannot pass the record's limit)."""
        lo, n = 0, len(sets)
        while lo < n:
            w = self._window
            hi = min(n, lo + max(1, (WINDOW_RECORD_BYTES - w.record) // _SET_RECORD_MAX))
            sizes = list(accumulate(len(data) for data in sets[lo:hi]))
            over = bisect_left(sizes, WINDOW_BYTES - w.nbytes)  # the set that fills it
            if over < len(sizes):
                hi = lo + over + 1
            w.targets += targets[lo:hi]
            w.sets += sets[lo:hi]
            w.counts += counts[lo:hi]
            w.digests += digests[lo:hi]
            w.nbytes += sizes[hi - lo - 1]
            w.record += INTENT_SET_SIZE * (hi - lo)
            for target in dict.fromkeys(targets[lo:hi]):
                if target not in w.keys:
                    w.keys[target] = None
                    w.record += intent_target_size(self.targets[target][0])
            if w.full():
                self._seal()
            lo = hi

    def flush(self) -> None:
        """Record the buffered window's intent and send it, and the one sealed before it."""
        self._seal()
        self._send_sealed()

    def _seal(self) -> None:
        """Start recording the buffered window's intent (the store answers while the task goes
        on); send the window sealed before it meanwhile (its intent was confirmed)."""
        w = self._window
        if not w.sets:
            return
        by_target: dict[int, list[SetDigest]] = {target: [] for target in w.keys}
        for target, digest in zip(w.targets, w.digests, strict=True):
            by_target[target].append(digest)
        window = IntentWindow(lists=self.resolved())
        for target, digests in by_target.items():
            key = self.targets[target]
            window.sets[key] = digests
            if key not in self._starts:
                self._starts[key] = window.starts[key] = self._log_end(key)
        fault_point("before-intent")
        recording = self.store.start_intent(self.ident, self._next_window, encode_intent(window))
        self._next_window += 1
        self._window = _Window()
        # tracked before the earlier window is sent: if that fails, close() still waits for it
        earlier, self._sealed = self._sealed, (w, recording)
        if earlier is not None:
            self._send_window(*earlier)

    def _send_sealed(self) -> None:
        """Send the sealed window once its intent is recorded (its error, if it was not)."""
        sealed, self._sealed = self._sealed, None
        if sealed is not None:
            self._send_window(*sealed)

    def _send_window(self, w: _Window, recording: Recording) -> None:
        recording()  # bounded: the store's own calls are
        fault_point("after-intent")
        self._fence(remote=True)
        first = 0
        if len(w.sets) > 1 and os.environ.get(FAULT_ENV, "").startswith("mid-send"):
            self._send(w.targets[:1], w.sets[:1], w.counts[:1])
            self._producer().write_buffered()  # the first set on the socket, then the point
            fault_point("mid-send")
            first = 1
        self._send(w.targets[first:], w.sets[first:], w.counts[first:])

    def _settle_sealed(self) -> None:
        """Wait for an intent still being recorded (so no record lands after the lock is
        released; its error does not matter then: its window was not sent)."""
        if self._sealed is not None:
            _, recording = self._sealed
            self._sealed = None
            with contextlib.suppress(Exception):
                recording()

    def _log_end(self, key: TopicPartition) -> int:
        topic, broker, partition = key
        try:
            return self._producer().log_end(broker, topic, partition)
        except KafkaError as e:
            raise with_context(e, then=f" (asking the log end of topic {topic!r} "
                               f"{partition_key(broker, partition)} before recording the intent "
                               f"of {self.ident.describe()}: nothing of this window was sent). "
                               f"{self.retry_note}") from e

    def end_of_input(self) -> None:
        """All sets made: send the last window; fewer sets than recorded is an input change."""
        self.flush()
        for key, recorded in self._recorded.items():
            made = self._index.get(key, 0)
            if made < len(recorded):
                raise self._differs(key, f"it made {made} message sets, the earlier attempt "
                                         f"recorded {len(recorded)}")

    def finish(self, rows: int, written: dict[TopicPartition, tuple[int, int, int]]) -> None:
        """After the barrier: the done record (the task's commit message), the lock released."""
        fault_point("after-send")
        assert self._sealed is None  # end_of_input sent every window
        self.store.finish(self.ident, encode_done(rows, written))
        self._held = False
        self._done = True
        fault_point("after-done")

    def records(self) -> tuple[str, ...] | None:
        """The record nodes of this task (``<batch>/<partition>/<name>``) as far as this
        attempt knows them (None when an earlier attempt finished: it does not)."""
        if self._found_done:
            return None
        names = [intent_name(i) for i in range(self._next_window)]
        names += [DONE] if self._done else []
        return tuple(f"{self.ident.batch}/{self.ident.partition}/{n}" for n in names)

    def close(self) -> None:
        """Release the lock if still held (the attempt failed): a retry takes over."""
        self._settle_sealed()
        claiming, self._claiming = self._claiming, None
        if claiming is not None:  # started, never answered (the input failed meanwhile)
            with contextlib.suppress(Exception):
                self._held = claiming().done is None  # a done record: released already
        if self._held:
            self._held = False
            self.store.release(self.ident)

    def before_write(self) -> None:
        """The producer is about to write buffered sets to a socket: stop unless this attempt
        still holds its lock (asked of the store). Sets are handed to the producer when their
        window's intent is recorded, but reach a socket only here, so an attempt frozen past its
        lock (a zombie) sends nothing after another attempt took over."""
        if self._held:
            self._fence(remote=True)

    # --- read-back ---------------------------------------------------------------------------

    def _read_back(self, visible_by: float) -> dict[TopicPartition, int]:
        """Per recorded target, how many of its recorded sets are in its log."""
        landed: dict[TopicPartition, int] = {}
        while True:
            for key, sets in self._recorded.items():
                if landed.get(key, -1) < len(sets):
                    landed[key] = landed_prefix(sets, self._log(key, self._starts[key]))
            if all(landed[k] == len(s) for k, s in self._recorded.items()) or (
                    time.monotonic() >= visible_by):
                return landed
            time.sleep(min(_POLL_S, max(0.0, visible_by - time.monotonic())))

    def _log(self, key: TopicPartition, start: int) -> list[LogUnit]:
        """The messages of ``key``'s log from ``start`` to its (flushed) end."""
        topic, broker, partition = key
        conn = self._producer().connection(broker)
        end = latest(conn, topic, partition)
        units: list[LogUnit] = []
        offset, size = start, _READ_FIRST
        while offset < end:
            resp = conn.fetch(topic, partition, offset, size)
            raise_for_code(resp.error, f"reading back topic {topic!r} "
                                       f"{partition_key(broker, partition)} at offset {offset}")
            got = log_units(resp.messages, offset, self._limit)
            if not got:
                if size >= _READ_MAX:
                    raise KafkaError(f"reading back topic {topic!r} "
                                     f"{partition_key(broker, partition)}: no complete message "
                                     f"at offset {offset} in {size} bytes")
                size *= 2
                continue
            units.extend(got)
            offset = got[-1].next_offset
        return units

    # --- errors ------------------------------------------------------------------------------

    def _fence(self, *, remote: bool = False) -> None:
        """Stop unless this attempt still holds its lock: a local check before each set an
        earlier attempt recorded, a check with the store (ZooKeeper: one round trip) before a
        window is handed to the producer and before each write of the producer's buffers."""
        if not (self.store.verify(self.ident) if remote else self.store.holds()):
            raise DeliveryLockError(
                f"exactly-once write of {self.ident.describe()}: this attempt lost its lock "
                f"({self.store!r}: its ZooKeeper session ended or the lease was broken) before "
                "sending; it stops so that another attempt writes alone"
            )

    def _differs(self, key: TopicPartition, what: str) -> NonDeterministicInputError:
        topic, broker, partition = key
        return NonDeterministicInputError(
            f"exactly-once write of {self.ident.describe()}: for topic {topic!r} "
            f"broker-partition {partition_key(broker, partition)} {what}. The rows of this "
            "retry or re-run differ from the earlier attempt's: the input is not replayable "
            "(e.g. a shuffle's row order, a non-deterministic expression, a source that does "
            "not replay the same rows; kafka07, files and Delta replay). Nothing was sent "
            "twice or dropped silently; the task stops"
        )

    def _decode(self, fn: Callable[[bytes], _R], data: bytes, what: str) -> _R:
        try:
            return fn(data)
        except (RecordError, UnicodeDecodeError) as e:
            raise KafkaError(f"exactly-once write of {self.ident.describe()}: its {what} record "
                             f"in {self.store!r} is unreadable: {e}") from e


def _fmt(d: SetDigest) -> str:
    return f"{d.messages} messages, {d.inner_bytes} bytes, digest {d.digest:08x}"

