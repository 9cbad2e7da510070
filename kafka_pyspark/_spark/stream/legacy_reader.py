"""The streaming reader on Spark 4.0 and 4.1, which have no admission control.

Their Python streaming API calls ``latestOffset()`` without the micro-batch's start and
without a read limit (:data:`~kafka_pyspark._spark.compat.ADMISSION_CONTROL` is false). The reader
keeps the start itself: a fresh query's initial offset, then the end it returned last (Spark's next
micro-batch starts there), and computes the end with :class:`.reader.Kafka07StreamReader`'s
own steps and no limit. Admission options (``maxBytesPerTrigger``) are refused at ``start()``.
``Trigger.AvailableNow`` needs nothing here: Spark asks for ``latestOffset()`` once when the
query starts and runs to that end.

A query restarted from a checkpoint: Spark does not say where it stands before its first
``latestOffset()``, so that one end is every registered broker-partition's log end; the
``partitions(start, end)`` that follows checks it against the checkpoint's start (data loss
as usual). A broker-partition whose broker is unregistered or does not answer at that
moment keeps its checkpointed offset (``docs/running.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark._shared.partition_key import describe_tp
from kafka_pyspark._spark.compat import ReadAllAvailable, ReadLimit, needs_spark
from kafka_pyspark._spark.stream.admission import Limits
from kafka_pyspark._spark.stream.checkpoint import Offsets, from_offset_dict, to_offset_dict
from kafka_pyspark._spark.stream.reader import Kafka07StreamReader
from kafka_pyspark.errors import OptionError, data_loss_skipped

__all__ = ["Kafka07LegacyStreamReader"]

log = logging.getLogger(__name__)

#: the first pyspark whose streaming API passes the start and a read limit
ADMISSION_SPARK = "4.2"


class Kafka07LegacyStreamReader(Kafka07StreamReader):
    """``spark.readStream.format("kafka07")`` on Spark < 4.2 (see the module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        for name in Limits.options_set(self.options):
            raise OptionError(name, needs_spark(f"{name} (admission control)", ADMISSION_SPARK))
        self._start: dict[str, Any] | None = None  # where the next micro-batch starts
        self._guessed: Offsets | None = None  # log ends given without a known start

    def initialOffset(self) -> dict[str, Any]:
        self._start = super().initialOffset()
        return self._start

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        """The next micro-batch's end. Spark < 4.2 passes nothing; a call with ``start`` (and
        a limit) is the 4.2 step itself."""
        if start is not None:
            return super().latestOffset(start, limit or ReadAllAvailable())
        if self._start is None:
            end = self._log_ends()
        else:
            end = super().latestOffset(self._start, ReadAllAvailable())
        self._start = end
        return end

    def _log_ends(self) -> dict[str, Any]:
        """Every registered broker-partition at its log end (start unknown: a restart)."""
        tps, _ = self.offsets.view()
        bounds = self.offsets.bounds(tps)
        self._guessed = {tp: b.latest for tp, b in bounds.items()}
        return to_offset_dict(self._guessed)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """As on Spark 4.2; after a restart, the checkpoint's start is first checked against
        the log ends guessed for it: a start past its log end is data loss."""
        guessed, self._guessed = self._guessed, None
        if guessed is not None:
            begin = from_offset_dict(start)
            self._check_restart(begin, guessed)
            self._keep_unanswered(begin, guessed)
        return super().partitions(start, end)

    def _keep_unanswered(self, begin: Offsets, guessed: Offsets) -> None:
        """Broker-partitions of the checkpoint whose log end was not guessed (their broker was
        not registered or did not answer OFFSETS) keep their checkpointed offset: the next
        micro-batch starts from the guessed ends and those offsets, as a vanished
        broker-partition keeps its offset on Spark 4.2 (never read again from its earliest)."""
        kept = {tp: s for tp, s in begin.items() if tp not in guessed}
        if kept and self._start is not None:
            self._start = to_offset_dict({**from_offset_dict(self._start), **kept})

    def _check_restart(self, begin: Offsets, guessed: Offsets) -> None:
        """Each broker-partition whose checkpointed start lies past its log end: fail
        (``failOnDataLoss``), else warn that the query goes on from the log end."""
        for tp, s in sorted(begin.items()):
            b = self.offsets.known_bounds(tp)
            if b is None or tp not in guessed or s <= guessed[tp]:
                continue
            if self.options.fail_on_data_loss:
                self._data_loss(tp, s, b)  # raises
            log.warning("kafka07 stream: %s", data_loss_skipped(
                f"{describe_tp(tp)}: the checkpoint is at offset {s}, past the log end "
                f"{guessed[tp]} (the log was truncated or recreated)",
                f"continuing from the log end {guessed[tp]}"))
