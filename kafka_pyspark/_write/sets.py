"""Buffering per broker-partition and cutting message sets.

Rows routed to a target wait in its buffer until ``batch.size`` of them are there; then they
are cut into message sets of ``batch.size`` messages, fewer where an uncompressed set would not
fit one request or a compressed wrapper would exceed ``max.message.size`` (split in halves),
encoded (all sets of a flush in one encoder call) and handed to ``queue`` together, in order
(per set, the Python a task runs is what bounds uncompressed writes: docs/writing.md). One
message that cannot fit is a :class:`~kafka_pyspark.errors.MessageTooLargeError` naming its
row. Sizes: :mod:`kafka_pyspark._write.sizes`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._options.write_options import WriteOptions
from kafka_pyspark._shared.partition_key import partition_key
from kafka_pyspark._write.digest import SetDigest, set_digests
from kafka_pyspark._write.rows import RowError, Targets, compact, value_offsets
from kafka_pyspark._write.sizes import (
    MAX_COMPRESS_INPUT,
    MESSAGE_OVERHEAD,
    SizeLimits,
    cut_runs,
    set_limit,
)
from kafka_pyspark.errors import MessageTooLargeError

Rows = npt.NDArray[np.int64]
Queue = Callable[
    [list[int], list[bytes | memoryview], list[int], "list[SetDigest] | None"], None
]
"""queue(targets, message sets, messages in each, their digests or None when not asked for):
sets in the order they are made, one list entry per set"""


class _Pending:
    """Rows routed to one broker-partition, not yet cut into a message set."""

    __slots__ = ("chunks", "count", "rows")

    def __init__(self) -> None:
        self.chunks: list[pa.Array] = []
        self.rows: list[Rows] = []
        self.count = 0


class SetBuilder:
    """Per-target buffers of one task; hands finished message sets to ``queue``."""

    def __init__(
        self,
        opts: WriteOptions,
        targets: Targets,
        limits: SizeLimits,
        queue: Queue,
        label: Callable[[int], str],
        *,
        digests: bool = False,
    ) -> None:
        from kafka_pyspark._messages import encode_message_sets_arrow

        self.opts = opts
        self.targets = targets
        self._limits = limits
        self._queue = queue
        self._label = label
        self._encode_many = encode_message_sets_arrow
        self._pending: dict[int, _Pending] = {}
        #: compute each set's :class:`SetDigest` (exactly-once delivery needs them)
        self._digests = digests

    def add_in_order(self, values: pa.Array, dest: Rows, base: int) -> None:
        """Rows whose targets come in runs (keyless rows), one target per row: as
        :meth:`add_runs` with the runs of ``dest``."""
        starts = np.flatnonzero(np.diff(dest)) + 1
        bounds = np.concatenate([[0], starts, [len(dest)]]).astype(np.int64)
        self.add_runs(values, dest[bounds[:-1]] if len(dest) else dest, bounds, base)

    def add_runs(self, values: pa.Array, targets: Rows, bounds: Rows, base: int) -> None:
        """Rows in runs (keyless rows): rows ``bounds[i]:bounds[i + 1]`` go to ``targets[i]``,
        zero-copy slices, in order.

        A run whose target has nothing buffered is cut into sets straight away, and the sets
        of consecutive such runs are encoded in one encoder call (keyless runs are
        ``batch.size`` rows: without this, one call per set). Each target still gets its
        sets in row order: a run that must join buffered rows first sends the runs before
        it."""
        rows = np.arange(base, base + len(values), dtype=np.int64)
        size = self.opts.batch_size
        lengths = np.diff(bounds)
        tail = lengths % size
        busy = [t for t, pend in self._pending.items() if pend.count]
        if len(targets) and not tail[:-1].any() and not np.isin(targets, busy).any():
            # every run but the last is whole sets, and no target waits for buffered rows
            full = int(bounds[-1] - tail[-1])
            self._encode_whole(values, rows, np.repeat(targets, lengths // size),
                               int(bounds[0]), full)
            if full < bounds[-1]:
                target = int(targets[-1])
                self._append(target, values.slice(full), rows[full:])
            return
        span: list[tuple[int, int, int]] = []  # (target, lo, hi): runs ready, back to back
        for target, lo, hi in zip(targets.tolist(), bounds[:-1].tolist(), bounds[1:].tolist(),
                                  strict=True):
            pend = self._pending.get(target)
            # rows cut into sets now: whole sets' worth, unless rows wait in the buffer first
            full = 0 if pend is not None and pend.count else (hi - lo) - (hi - lo) % size
            if full:
                span.append((target, lo, lo + full))
            if lo + full < hi:  # the rest goes to the target's buffer, after the span's sets
                self._encode_span(values, rows, span)
                span = []
                self._append(target, values.slice(lo + full, hi - lo - full), rows[lo + full:hi])
        self._encode_span(values, rows, span)

    def _encode_whole(self, values: pa.Array, rows: Rows, set_targets: Rows, lo: int,
                      hi: int) -> None:
        """Rows [lo, hi), ``batch.size`` rows to a set, set ``j`` to ``set_targets[j]``: all
        in one encoder call when every set fits as it is, else as :meth:`_encode_span` cuts
        them."""
        if lo >= hi:
            return
        size = self.opts.batch_size
        offsets = value_offsets(values)
        cuts = np.arange(lo, hi + 1, size, dtype=np.int64)
        weights = np.diff(offsets[cuts])
        if self.opts.codec == "none":
            weights += MESSAGE_OVERHEAD * size
        if int(weights.max()) > min(map(self._weight_limit, set(set_targets.tolist()))):
            self._encode_span(values, rows, [(int(t), int(a), int(a) + size) for t, a in
                                             zip(set_targets, cuts[:-1], strict=True)])
            return
        self._encode_cuts(values, offsets, rows, set_targets.tolist(), cuts.tolist())

    def add_grouped(self, values: pa.Array, dest: Rows, base: int) -> None:
        """Rows with any targets: grouped by target (stable: each keeps its input order)."""
        rows = np.arange(base, base + len(values), dtype=np.int64)
        if len(dest) and (dest == dest[0]).all():
            self._append(int(dest[0]), values, rows)
            return
        order = np.argsort(dest, kind="stable")
        sorted_dest = dest[order]
        taken = values.take(pa.array(order))
        starts = np.flatnonzero(np.diff(sorted_dest)) + 1
        bounds = [0, *starts.tolist(), len(order)]
        for lo, hi in itertools.pairwise(bounds):
            self._append(int(sorted_dest[lo]), taken.slice(lo, hi - lo), rows[order[lo:hi]])

    def flush(self) -> None:
        """Everything still buffered, in sets (the last one of a target may be short)."""
        for target in sorted(self._pending):
            self._drain(target, final=True)

    def _append(self, target: int, values: pa.Array, rows: Rows) -> None:
        pend = self._pending.get(target)
        if pend is None:
            pend = self._pending[target] = _Pending()
        if pend.count + len(values) < self.opts.batch_size:
            # It waits for more rows: keep a compact copy, not a view that would hold the
            # whole Arrow batch in memory (with many partitions, that would be many batches).
            values, rows = compact(values), rows.copy()
        pend.chunks.append(values)
        pend.rows.append(rows)
        pend.count += len(values)
        if pend.count >= self.opts.batch_size:
            self._drain(target, final=False)

    def _drain(self, target: int, *, final: bool) -> None:
        pend = self._pending[target]
        if not pend.count:
            return
        values = pend.chunks[0] if len(pend.chunks) == 1 else pa.concat_arrays(pend.chunks)
        rows = pend.rows[0] if len(pend.rows) == 1 else np.concatenate(pend.rows)
        end = len(values) if final else len(values) - len(values) % self.opts.batch_size
        self._encode_span(values, rows, [(target, 0, end)])
        if end < len(values):
            pend.chunks = [compact(values.slice(end))]
            pend.rows = [rows[end:].copy()]
            pend.count = len(values) - end
        else:
            pend.chunks, pend.rows, pend.count = [], [], 0

    def _encode_span(self, values: pa.Array, rows: Rows,
                     span: list[tuple[int, int, int]]) -> None:
        """Cut each ``(target, lo, hi)`` of ``values`` into sets (the ranges back to back),
        encode them all in one encoder call (no per-set Python loop over rows), queue them."""
        if not span:
            return
        offsets = value_offsets(values)
        cuts = [(target, a, b) for target, lo, hi in span
                for a, b in self._cut(target, offsets, lo, hi)]
        if cuts:
            self._encode_cuts(values, offsets, rows, [target for target, _, _ in cuts],
                              [lo for _, lo, _ in cuts] + [cuts[-1][2]])

    def _encode_cuts(self, values: pa.Array, offsets: Rows, rows: Rows, targets: list[int],
                     bounds: list[int]) -> None:
        """Set ``j`` (rows ``bounds[j]:bounds[j + 1]``, back to back) to ``targets[j]``: one
        encoder call, then queued (one at a time, split or refused, if some set is too large
        for its topic)."""
        crcs = np.empty(bounds[-1] - bounds[0], dtype=np.uint32) if self._digests else None
        sets = self._encode_many(values, bounds, compression=self.opts.codec,
                                 level=self.opts.compression_level, crcs_out=crcs)
        lengths = [len(data) for data in sets]
        if not self._limits.fits_any_topic(max(lengths)):
            # some set may be too large for its topic: one at a time (split, or the row named)
            first = bounds[0]
            if crcs is not None:
                crcs = crcs.astype(">u4")  # once for all the sets' digests (digest.py)
            for target, (lo, hi), data in zip(targets, itertools.pairwise(bounds), sets,
                                                strict=True):
                self._emit(target, values.slice(lo, hi - lo), rows[lo:hi], data,
                           None if crcs is None else crcs[lo - first:hi - first])
            return
        counts = [hi - lo for lo, hi in itertools.pairwise(bounds)]
        digests = None
        if crcs is not None:
            digests = set_digests(crcs, counts, self._inner_bytes(offsets, bounds, lengths))
        self._queue(targets, sets, counts, digests)

    def _inner_bytes(self, offsets: Rows, bounds: list[int], lengths: list[int]) -> list[int]:
        """Per set (rows ``bounds[i]`` to ``bounds[i + 1]`` of values with these Arrow
        ``offsets``, encoded in ``lengths[i]`` bytes): its framed messages' bytes before
        compression, a :class:`SetDigest`'s ``inner_bytes``."""
        if self.opts.codec == "none":
            return lengths
        inner: list[int] = (np.diff(offsets[bounds]) + MESSAGE_OVERHEAD * np.diff(bounds)).tolist()
        return inner

    def _weight_limit(self, target: int) -> int:
        """The most a set for ``target`` may weigh (:meth:`_cut`): uncompressed, its encoded
        bytes fit one request; compressed, its payload bytes are at most
        MAX_COMPRESS_INPUT."""
        if self.opts.codec == "none":
            return set_limit(self._limits.request_bytes, self.targets[target][0])
        return MAX_COMPRESS_INPUT

    def _cut(self, target: int, offsets: Rows, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """Rows [lo, hi) of values with these Arrow ``offsets`` in runs of batch.size rows no
        heavier than :meth:`_weight_limit`."""
        per_message = MESSAGE_OVERHEAD if self.opts.codec == "none" else 0
        return cut_runs(offsets, lo, hi, self.opts.batch_size, self._weight_limit(target),
                        per_message)

    def _emit(self, target: int, values: pa.Array, rows: Rows,
              data: bytes | memoryview | None = None,
              crcs: npt.NDArray[np.uint32] | None = None) -> None:
        """Queue one message set, ``data`` if already encoded, ``crcs`` its messages' CRCs
        (split in halves if its wrapper is too large)."""
        if data is None:
            crcs = np.empty(len(values), dtype=np.uint32) if self._digests else None
            data = self._encode_many(values, [0, len(values)], compression=self.opts.codec,
                                     level=self.opts.compression_level, crcs_out=crcs)[0]
        topic = self.targets[target][0]
        payload = len(data) - MESSAGE_OVERHEAD
        # one message (a compressed wrapper, or a lone row) is held to max.message.size too
        one_message = self.opts.codec != "none" or len(values) == 1
        if (
            self._limits.message_over(payload, topic)
            if one_message
            else self._limits.set_over(len(data), topic)
        ):
            if len(values) > 1:
                half = len(values) // 2
                self._emit(target, values.slice(0, half), rows[:half])
                self._emit(target, values.slice(half), rows[half:])
                return
            raise RowError(self._too_large(target, values, int(rows[0]), payload))
        digest = self._digest(values, data, crcs)
        self._queue([target], [data], [len(values)], None if digest is None else [digest])

    def _digest(self, values: pa.Array, data: bytes | memoryview,
                crcs: npt.NDArray[np.uint32] | None) -> SetDigest | None:
        if crcs is None:
            return None
        inner = self._inner_bytes(value_offsets(values), [0, len(values)], [len(data)])
        return set_digests(crcs, [len(values)], inner)[0]

    def _too_large(
        self, target: int, values: pa.Array, row: int, payload: int
    ) -> MessageTooLargeError:
        topic, b, p = self.targets[target]
        codec = self.opts.codec
        message = (
            f"its {codec} wrapper message ({len(values[0].as_py())} bytes before compression)"
            if codec != "none"
            else "its message"
        )
        where = f"{message} for topic {topic!r} broker-partition {partition_key(b, p)}"
        return self._limits.too_large(self._label(row), where, payload, topic)
