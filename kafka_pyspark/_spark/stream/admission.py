"""Admission control of a stream: ``maxBytesPerTrigger`` (Spark's ``ReadMaxBytes``). Pure.

:class:`Limits` is a micro-batch's admission rules, set up from the options and Spark's read
limit; :func:`admit` chooses each micro-batch's end offsets at message boundaries within the
byte budget and :func:`predict_windows` the windows its first round scans (for the prefetch);
:func:`next_ages` keeps the starvation ages it uses for fairness; :func:`cap_to_target` caps
ends at a ``Trigger.AvailableNow`` target. The only I/O admission needs, reading message
headers in byte windows of the logs, is injected as a callable
(:data:`~kafka_pyspark._spark.stream.scan.ScanFn`; the stream reader's one MULTIFETCH per
broker, each answer read by :func:`~kafka_pyspark._spark.stream.scan.scan_window`), so the whole
algorithm is tested with synthetic logs (``tests/spark/stream/test_stream_offsets.py``) and driven
against real brokers by ``kafka_pyspark._spark.stream.reader``. See ``docs/streaming.md`` for the
algorithm and its cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafka_pyspark._shared.partition_key import TopicPartition, describe_tp
from kafka_pyspark._spark.stream.checkpoint import Offsets
from kafka_pyspark._spark.stream.scan import HEADER, Scan, ScanFn, Windows
from kafka_pyspark.errors import InvalidMessageSizeError

__all__ = [
    "Admission",
    "Limits",
    "admit",
    "cap_to_target",
    "next_ages",
    "predict_windows",
    "water_fill",
]


def water_fill(demands: Mapping[TopicPartition, int], budget: int) -> dict[TopicPartition, int]:
    """Split ``budget`` bytes fairly: equal shares, a share a partition cannot use is
    redistributed to the others (max-min fairness). Integer and deterministic: the bytes left
    over from integer division go one each to the largest demands, then by sort order.

    Every result is ``<= demands[tp]`` and the sum is ``min(budget, sum(demands))``.
    """
    out = {tp: 0 for tp in demands}
    remaining = max(0, budget)
    # ascending by demand: the small ones are satisfied first, their unused share flows on
    todo = sorted((tp for tp in demands if demands[tp] > 0), key=lambda tp: (demands[tp], tp))
    while todo:
        share = remaining // len(todo)
        smallest = todo[0]
        if demands[smallest] <= share:
            out[smallest] = demands[smallest]
            remaining -= demands[smallest]
            todo.pop(0)
            continue
        # everyone left wants more than the share: give each the share, spread the remainder
        rest = remaining - share * len(todo)
        for tp in todo:
            out[tp] = share
        for tp in sorted(todo, key=lambda tp: (-demands[tp], tp))[:rest]:
            out[tp] += 1
        break
    return out


@dataclass(frozen=True)
class Admission:
    """Result of :func:`admit`."""

    ends: Offsets
    """End offset per broker-partition (every key of the input), always a message boundary."""
    oversize: TopicPartition | None = None
    """Set when the micro-batch is one message larger than the whole budget (progress rule)."""
    scanned_bytes: int = 0
    """Bytes the scans asked for (the driver-side cost of cutting at message boundaries)."""
    windows: tuple[Windows, ...] = field(default_factory=tuple)
    """The windows scanned, one mapping per scan round trip."""


MAX_ROUNDS = 3  # water-filling rounds (one scan round trip per broker each)


def admit(
    positions: Mapping[TopicPartition, tuple[int, int]],
    budget: int,
    scan: ScanFn,
    *,
    segment_starts: Mapping[TopicPartition, Sequence[int]] | None = None,
    ages: Mapping[TopicPartition, int] | None = None,
) -> Admission:
    """Choose end offsets for one micro-batch reading at most ``budget`` bytes.

    ``positions``: ``{tp: (start, latest)}``; ``start`` and ``latest`` are message boundaries
    (a log end is one). ``segment_starts``: the segment start offsets OFFSETS returned, also
    boundaries, known for free. ``ages``: how many consecutive micro-batches a partition with
    pending data admitted nothing (starvation; kept by the caller, only affects fairness).

    Guarantees: every end is a message boundary with ``start <= end <= latest``; the bytes
    admitted, ``sum(end - start)``, are ``<= budget``, except that a micro-batch that could
    admit nothing at all takes exactly one message (larger than the budget) so the stream
    always progresses; a partition that admitted nothing for a while gets priority, so none
    starves behind partitions with smaller messages.

    Algorithm (water-filling at message boundaries):

    1. Nothing pending, or everything pending fits: end = latest (no I/O).
    2. Priority order: starvation age descending, then ``(topic, broker, partition)``. The
       head message of every starved partition is looked at (a 4-byte window each); if the
       top one is larger than the whole budget the micro-batch is that message alone;
       otherwise starved heads are reserved in priority order while they fit.
    3. The rest of the budget is water-filled over the pending bytes: each partition gets an
       equal share, a share a partition cannot use goes to the others.
    4. Each partition whose share does not reach ``latest`` gets one window scanned:
       ``[lo, cur + share + 4)`` where ``lo`` is the last known boundary (its current cut, or
       a segment start) at or before ``cur + share``; its cut moves to the last boundary at
       or before ``cur + share``. What the cuts left unused (each loses less than a message)
       is water-filled again over the partitions that moved (``MAX_ROUNDS`` rounds at most:
       one that could not move has a next message larger than any later share).
    5. Then, in priority order, a partition whose next message's size a scan saw takes that
       message while it fits in what is left.
    6. Nothing admitted: the first partition in priority order whose head size is known takes
       that one message.
    """
    starts = {tp: s for tp, (s, _) in positions.items()}
    latest = {tp: max(s, lt) for tp, (s, lt) in positions.items()}
    active = [tp for tp in positions if latest[tp] > starts[tp]]
    if not active:
        return Admission(dict(starts))
    if sum(latest[tp] - starts[tp] for tp in active) <= budget:  # 1. everything fits
        return Admission(dict(latest))
    admission = _Admitter(
        starts, latest, active, max(0, budget), scan, segment_starts or {}, ages or {}
    )
    return admission.run()


class _Admitter:
    """One run of :func:`admit` over partitions with pending data and a budget they exceed.

    Every method is one step of the algorithm; ``cur`` is each partition's cut so far (a
    message boundary), ``remaining`` the budget not yet given out, ``head``/``last_scan``
    what the scans learnt.
    """

    def __init__(
        self,
        starts: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
        active: Sequence[TopicPartition],
        budget: int,
        scan: ScanFn,
        segs: Mapping[TopicPartition, Sequence[int]],
        age: Mapping[TopicPartition, int],
    ) -> None:
        self.starts = starts
        self.latest = latest
        self.active = active
        self.budget = budget
        self.remaining = budget
        self.segs = segs
        self.pending = {tp: latest[tp] - starts[tp] for tp in active}
        self.order = sorted(active, key=lambda tp: (-age.get(tp, 0), tp))
        self.starved = [tp for tp in self.order if age.get(tp, 0) > 0]
        self.ends: Offsets = dict(starts)
        self.cur: Offsets = {tp: starts[tp] for tp in active}
        self.head: dict[TopicPartition, int] = {}
        self.last_scan: dict[TopicPartition, Scan] = {}
        self._scan_fn = scan
        self._scanned = 0
        self._windows: list[Windows] = []

    def run(self) -> Admission:
        top = self._starved_heads()
        if top is not None:  # the top starved head alone is larger than the budget
            self.ends[top] = self.starts[top] + self.head[top]
            return self._result(top)
        self._reserve_starved()
        self._fill()
        used = self._take_whole_messages()
        return self._result(self._progress() if used == 0 else None)

    def _result(self, oversize: TopicPartition | None) -> Admission:
        return Admission(
            self.ends, oversize=oversize, scanned_bytes=self._scanned,
            windows=tuple(self._windows),
        )

    def _scan(self, windows: Windows) -> Mapping[TopicPartition, Scan]:
        """One scan round trip; its windows and bytes are accounted in the result."""
        self._windows.append(windows)
        self._scanned += sum(hi - lo for lo, hi in windows.values())
        return self._scan_fn(windows)

    def _head_window(self, tp: TopicPartition) -> tuple[int, int]:
        return (self.starts[tp], min(self.latest[tp], self.starts[tp] + HEADER))

    def _starved_heads(self) -> TopicPartition | None:
        """2. Look at every starved partition's head message; the top one in priority order
        if it alone is larger than the whole budget."""
        if not self.starved:
            return None
        found = self._scan({tp: self._head_window(tp) for tp in self.starved})
        for tp in self.starved:
            sc = found.get(tp)
            size = sc.size_at(self.starts[tp]) if sc is not None else None
            if size is not None:
                self.head[tp] = _check_head(tp, self.starts[tp], size, self.latest[tp])
        top = self.order[0]
        return top if top in self.head and self.head[top] > self.budget else None

    def _reserve_starved(self) -> None:
        """2. Starved heads reserved (their cut moves past them) in priority order while they
        fit."""
        for tp in self.starved:
            h = self.head.get(tp)
            if h is not None and h <= self.remaining and h <= self.pending[tp]:
                self._advance(tp, self.starts[tp] + h)

    def _fill(self) -> None:
        """3-4. Water-fill what is left, cut at the last boundary, repeat with what the cuts
        left (``MAX_ROUNDS`` at most)."""
        open_ = [tp for tp in self.active if self.cur[tp] < self.latest[tp]]
        for _ in range(MAX_ROUNDS):
            if self.remaining <= 0 or not open_:
                break
            moved = self._fill_round(open_)
            # a partition that could not move has a next message larger than its share: the
            # shares only shrink from here, so it is done until the one-message step below
            open_ = [tp for tp in open_ if tp in moved and self.cur[tp] < self.latest[tp]]
            if not moved:
                break
        for tp in self.active:
            self.ends[tp] = self.cur[tp]

    def _fill_round(self, open_: Sequence[TopicPartition]) -> set[TopicPartition]:
        """One water-filling round: the partitions whose cut moved."""
        share = water_fill({tp: self.latest[tp] - self.cur[tp] for tp in open_}, self.remaining)
        windows: dict[TopicPartition, tuple[int, int]] = {}
        limits: dict[TopicPartition, int] = {}
        moved: set[TopicPartition] = set()
        for tp in open_:
            if share[tp] == 0:
                continue
            hi = self.cur[tp] + share[tp]
            if hi >= self.latest[tp]:
                self._advance(tp, self.latest[tp])
                moved.add(tp)
                continue
            window = self._window(tp, hi)
            if window is not None:
                windows[tp] = window
                limits[tp] = hi
        if windows:
            found = self._scan(windows)
            for tp, (lo, _) in windows.items():
                end = self._cut(tp, lo, limits[tp], found.get(tp))
                if end > self.cur[tp]:
                    self._advance(tp, end)
                    moved.add(tp)
        return moved

    def _advance(self, tp: TopicPartition, end: int) -> None:
        self.remaining -= end - self.cur[tp]
        self.cur[tp] = end

    def _window(self, tp: TopicPartition, hi: int) -> tuple[int, int] | None:
        """4. The window to scan for a cut at or before ``hi``: from the last known boundary
        (the current cut, or a segment start) to ``hi + 4``; None if the next message is
        already known not to fit (no scan)."""
        cur = self.cur[tp]
        known = self.last_scan.get(tp)
        size = known.size_at(cur) if known is not None else None
        if size is not None and cur + size > hi:
            return None
        lo = cur
        for seg in self.segs.get(tp, ()):
            if lo < seg <= hi:
                lo = seg
        return (lo, min(self.latest[tp], hi + HEADER))

    def _cut(self, tp: TopicPartition, lo: int, limit: int, sc: Scan | None) -> int:
        """4. The last boundary the scan saw at or before ``limit`` (``lo`` if none)."""
        if sc is None:
            return lo
        self.last_scan[tp] = sc
        last = sc.last_at_or_before(limit)
        return lo if last is None else max(lo, last)

    def _take_whole_messages(self) -> int:
        """5. In priority order, a partition whose next message's size a scan saw takes that
        message while it fits in what is left. Returns the bytes admitted in all."""
        ends = self.ends
        used = sum(ends[tp] - self.starts[tp] for tp in self.active)
        for tp in self.order:
            sc = self.last_scan.get(tp)
            if sc is None or ends[tp] >= self.latest[tp]:
                continue
            size = sc.size_at(ends[tp])
            if size is not None and size <= self.remaining and ends[tp] + size <= self.latest[tp]:
                ends[tp] += size
                self.remaining -= size
                used += size
        return used

    def _progress(self) -> TopicPartition | None:
        """6. Nothing admitted: the first partition in priority order whose head size is
        known takes that one message (its head is scanned now if no scan saw it)."""
        unknown = {
            tp: self._head_window(tp)
            for tp in self.order
            if tp not in self.head and tp not in self.last_scan
        }
        if unknown:  # only with a budget too small to have scanned anything
            self.last_scan.update(self._scan(unknown))
        for tp in self.order:
            size = self.head.get(tp)
            if size is None:
                sc = self.last_scan.get(tp)
                size = sc.size_at(self.starts[tp]) if sc is not None else None
            if size is not None:
                self.ends[tp] = self.starts[tp] + _check_head(
                    tp, self.starts[tp], size, self.latest[tp]
                )
                return tp
        return None


def _check_head(tp: TopicPartition, start: int, size: int, latest: int) -> int:
    """A message starting at a boundary ends at or before the log end (itself a boundary):
    a header claiming more means ``start`` is not a message boundary."""
    if start + size > latest:
        raise InvalidMessageSizeError(
            f"{describe_tp(tp)}: the message at offset "
            f"{start} claims {size} bytes, past the log end {latest}: {start} is not a message "
            "boundary (a stream offset must be one: startingOffsets JSON given inside a "
            "message?)",
            offset=start,
        )
    return size


def predict_windows(
    positions: Mapping[TopicPartition, tuple[int, int]], budget: int
) -> dict[TopicPartition, tuple[int, int]]:
    """The windows the first water-filling round of :func:`~.admission.admit` scans for
    ``positions`` (``{tp: (start, latest)}``) and ``budget``, from each start (a window that
    :func:`~.admission.admit` starts later, at a segment start, lies inside it): none when
    everything pending fits."""
    pending = {tp: lt - s for tp, (s, lt) in positions.items() if lt > s}
    if sum(pending.values()) <= budget:
        return {}
    share = water_fill(pending, budget)
    out: dict[TopicPartition, tuple[int, int]] = {}
    for tp, n in share.items():
        s, lt = positions[tp]
        if n > 0 and s + n < lt:
            out[tp] = (s, min(lt, s + n + HEADER))
    return out


@dataclass(frozen=True)
class Limits:
    """What admission control holds one micro-batch to: the one place the stream reader's
    admission rules are set up (from the options and the read limit Spark passes) and
    applied (:meth:`admit`, and :meth:`first_windows` for the prefetch)."""

    max_bytes: int
    """``maxBytesPerTrigger`` (Spark's ``ReadMaxBytes``): bytes per micro-batch."""

    @classmethod
    def of(cls, limit: object) -> Limits | None:
        """The limits of one ``latestOffset`` call, from the read limit Spark passes; None:
        every log end (``ReadAllAvailable``)."""
        from kafka_pyspark._spark.compat import ReadMaxBytes

        return cls(limit.max_bytes) if isinstance(limit, ReadMaxBytes) else None

    def admit(
        self,
        positions: Mapping[TopicPartition, tuple[int, int]],
        scan: ScanFn,
        *,
        segment_starts: Mapping[TopicPartition, Sequence[int]],
        ages: Mapping[TopicPartition, int],
    ) -> Admission:
        """:func:`admit` within these limits."""
        return admit(positions, self.max_bytes, scan, segment_starts=segment_starts, ages=ages)

    def first_windows(
        self, positions: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """:func:`predict_windows` within these limits."""
        return predict_windows(positions, self.max_bytes)


def next_ages(
    ages: Mapping[TopicPartition, int],
    positions: Mapping[TopicPartition, tuple[int, int]],
    ends: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Starvation ages after a micro-batch: +1 for a partition with pending data that admitted
    nothing, dropped (0) for every other."""
    out: dict[TopicPartition, int] = {}
    for tp, (s, lt) in positions.items():
        if lt > s and ends.get(tp, s) == s:
            out[tp] = ages.get(tp, 0) + 1
    return out


def cap_to_target(
    latest: Mapping[TopicPartition, int], target: Mapping[TopicPartition, int] | None
) -> Offsets:
    """Trigger.AvailableNow: never go past the offsets recorded at the start of the query.

    A partition not in ``target`` appeared after it was recorded: it contributes nothing.
    """
    if target is None:
        return dict(latest)
    out: Offsets = {}
    for tp, off in latest.items():
        if tp in target:
            out[tp] = min(off, target[tp])
    return out
