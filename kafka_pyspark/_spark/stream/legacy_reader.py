"""The streaming reader on Spark 4.0 and 4.1, which have no admission control for Python streams.

Their Python streaming API calls ``latestOffset()`` without the micro-batch's start and without
a read limit (:data:`~kafka_pyspark._spark.compat.ADMISSION_CONTROL` is false). What they call,
in order (traced on pyspark 4.0.0 and 4.1.4; ``docs/streaming.md``, "Spark 4.0 and 4.1"):

- a fresh query: ``latestOffset()`` first, then ``initialOffset()``, then
  ``partitions(initial, end)``;
- a query restarted from a checkpoint: first ``partitions(X, X)``, ``X`` being the last end in
  the checkpoint's offset log (Spark's ``setLatestSeenOffset``), then, if that micro-batch was
  not committed, its replay ``partitions(start, X)``;
- then, per trigger: ``latestOffset()``, ``commit(previous end)``, ``partitions(previous end,
  end)``;
- ``Trigger.AvailableNow`` and ``Trigger.Once``: one such micro-batch (Spark "falls back to
  single batch execution"); after an interrupted run, only the replay.

So the reader always knows where the next micro-batch starts: the end of the last
``partitions()``, or of its own last answer, or, before either, the initial offset of a fresh
query, which the first ``latestOffset()`` resolves and ``initialOffset()`` then returns. Each
end is :class:`.reader.Kafka07StreamReader`'s, with ``maxBytesPerTrigger`` applied as Spark 4.2
applies its ``ReadMaxBytes``.

Spark's optional availableNow wrapper (``spark.sql.streaming.triggerAvailableNowWrapper.enabled``)
asks for an end before a restarted query says where it stands, and asks again before planning
it: an end not planned yet is answered again as it was, and a restart found after such a guess
fails the query when the guess would skip or repeat data (:meth:`_restarted_after_guess`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark._shared.partition_key import describe_tp
from kafka_pyspark._spark.compat import SPARK_VERSION, ReadAllAvailable, ReadLimit
from kafka_pyspark._spark.stream.checkpoint import Offsets, from_offset_dict
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark.errors import KafkaError, data_loss_skipped

__all__ = ["AVAILABLE_NOW_NOTE", "Kafka07LegacyStreamReader"]

log = logging.getLogger(__name__)

AVAILABLE_NOW_NOTE = (
    "Spark {version} has no admission control for Python streams: the source applies "
    "maxBytesPerTrigger={limit} to every micro-batch itself. Spark {version} runs "
    "Trigger.AvailableNow (and Trigger.Once) as one micro-batch (its warning 'does not support "
    "Trigger.AvailableNow'), so such a run reads at most {limit} bytes and leaves the rest to "
    "the next run; a processing-time trigger reads everything in bounded micro-batches "
    "(docs/streaming.md, 'Spark 4.0 and 4.1')"
)
"""Logged once per query on Spark < 4.2 when ``maxBytesPerTrigger`` is set."""


class Kafka07LegacyStreamReader(Kafka07StreamReader):
    """``spark.readStream.format("kafka07")`` on Spark < 4.2 (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        self._next: dict[str, Any] | None = None  # where the next micro-batch starts
        self._unplanned: dict[str, Any] | None = None  # an end answered, not planned yet
        self._guess: dict[str, Any] | None = None  # an end answered before any partitions()
        self._announced = False

    def initialOffset(self) -> dict[str, Any]:
        """A fresh query's start: resolved once (the first ``latestOffset()`` may have asked
        first), the same offsets for every call."""
        initial = self.memory.initial
        if initial is None:
            initial = super().initialOffset()
        if self._next is None:
            self._next = initial
        return initial

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        """The next micro-batch's end. Spark < 4.2 passes nothing; a call with ``start`` (and
        a limit) is the 4.2 step itself."""
        if start is not None:
            return super().latestOffset(start, limit or ReadAllAvailable())
        self._announce()
        if self._unplanned is not None:  # asked again before planning it: the same end
            return self._unplanned
        if self._next is None:  # nothing from Spark yet: a fresh query (module docstring)
            self._next = self.initialOffset()
            self._guess = self._next
        begin = self._next
        end = super().latestOffset(begin, self.getDefaultReadLimit())
        if self._guess is not None:
            self._guess = end
        if end != begin:
            self._next = self._unplanned = end
        return end

    def _announce(self) -> None:
        """Once per query: what ``maxBytesPerTrigger`` does on this Spark."""
        limit = self.options.max_bytes_per_trigger
        if not self._announced and limit is not None:
            log.warning("kafka07 stream: %s", AVAILABLE_NOW_NOTE.format(
                version=SPARK_VERSION, limit=limit))
        self._announced = True

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """As on Spark 4.2; ``end`` is where the next micro-batch starts."""
        guess, self._guess = self._guess, None
        if guess is not None and start != self.memory.initial:
            self._restarted_after_guess(from_offset_dict(start), from_offset_dict(guess))
        self._next, self._unplanned = end, None
        return super().partitions(start, end)

    def _restarted_after_guess(self, begin: Offsets, guess: Offsets) -> None:
        """The query was restarted, yet Spark asked for an end first (its availableNow
        wrapper): that end, resolved from ``startingOffsets``, is only right where it is at or
        past the checkpoint's start. A start past its log end is data loss (``failOnDataLoss``);
        any other start past the end answered, or not in it, fails the query, which would
        otherwise read it again or never."""
        for tp, s in sorted(begin.items()):
            g = guess.get(tp)
            if g is not None and s <= g:
                continue
            b = self.offsets.known_bounds(tp)
            if g is not None and b is not None and s > b.latest:
                if self.options.fail_on_data_loss:
                    self._data_loss(tp, s, b)  # raises
                log.warning("kafka07 stream: %s", data_loss_skipped(
                    f"{describe_tp(tp)}: the checkpoint is at offset {s}, past the log end "
                    f"{b.latest} (the log was truncated or recreated)",
                    f"continuing from offset {g}"))
                continue
            raise KafkaError(
                f"kafka07 stream on Spark {SPARK_VERSION}: Spark asked for this micro-batch's "
                "end before saying where the restarted query stands (Spark's availableNow "
                "wrapper, spark.sql.streaming.triggerAvailableNowWrapper.enabled); "
                f"{describe_tp(tp)} is at offset {s} in the checkpoint, the end given was "
                f"{'none' if g is None else g}. Turn the wrapper off (Spark's default) and "
                "run the query again: nothing was read or committed"
            )
