"""What a write task reports (:class:`Kafka07CommitMessage`) and what the driver does with the
reports: log the summary, raise the first task's data error (``commit_job``), log what stays in
Kafka after a failure (``abort_job``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

from kafka_pyspark._shared.partition_key import TopicPartition, partition_key
from kafka_pyspark.errors import KafkaError, with_context

log = logging.getLogger(__name__)


@dataclass
class Kafka07CommitMessage(WriterCommitMessage):
    """What one write task did. ``written`` maps (topic, broker, partition) to (messages,
    message-set bytes, message sets), all confirmed by the delivery barrier. ``failure`` is set
    when the task stopped at a bad row (see :mod:`kafka_pyspark._spark.write`): the error the
    driver raises, with context (it pickles whole, :class:`~kafka_pyspark.errors.KafkaError`);
    ``error``/``error_type`` are its text and class name. ``sink``: (sink id, batch id) of an
    exactly-once write (the driver deletes its records once committed), else None."""

    task: str
    rows: int
    written: dict[TopicPartition, tuple[int, int, int]] = field(default_factory=dict)
    failure: KafkaError | None = None
    sink: tuple[str, int] | None = None

    @property
    def error(self) -> str | None:
        return None if self.failure is None else str(self.failure)

    @property
    def error_type(self) -> str | None:
        return None if self.failure is None else type(self.failure).__name__

    @property
    def messages(self) -> int:
        return sum(m for m, _, _ in self.written.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b, _ in self.written.values())


def fmt_written(written: Mapping[TopicPartition, tuple[int, int, int]], limit: int = 20) -> str:
    if not written:
        return "nothing"
    by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
    for (topic, b, p), (m, n, _) in sorted(written.items()):
        by_topic.setdefault(topic, []).append((b, p, m, n))
    parts = []
    for topic, rows in by_topic.items():
        msgs = sum(r[2] for r in rows)
        nbytes = sum(r[3] for r in rows)
        detail = ", ".join(f"{partition_key(b, p)}: {m}" for b, p, m, _ in rows[:limit])
        if len(rows) > limit:
            detail += f", ... ({len(rows) - limit} more)"
        parts.append(f"topic {topic!r}: {msgs} messages, {nbytes} bytes [{detail}]")
    return "; ".join(parts)


def merge(messages: Iterable[Kafka07CommitMessage]) -> dict[TopicPartition, tuple[int, int, int]]:
    total: dict[TopicPartition, tuple[int, int, int]] = {}
    for msg in messages:
        for t, (m, n, s) in msg.written.items():
            pm, pn, ps = total.get(t, (0, 0, 0))
            total[t] = (pm + m, pn + n, ps + s)
    return total


def commit_job(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    """Driver: log the summary; raise the first task's data error, if any (with the summary)."""
    done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
    total = merge(done)
    rows = sum(m.rows for m in done)
    failed = [m for m in done if m.error is not None]
    summary = fmt_written(total)
    if failed:
        first = failed[0]
        log.error(
            "kafka07 %s failed: %d of %d tasks stopped at a bad row; written and confirmed "
            "before that (0.7 cannot take it back): %s",
            what, len(failed), len(done), summary,
        )
        others = "" if len(failed) == 1 else f" ({len(failed) - 1} more tasks failed alike)"
        assert first.failure is not None
        raise with_context(
            first.failure,
            then=f"{others}. Written and confirmed by all tasks before the job stopped (0.7 "
            f"cannot take it back): {summary}",
        )
    log.info("kafka07 %s committed: %d rows from %d tasks; %s", what, rows, len(done), summary)


def abort_job(messages: Sequence[WriterCommitMessage | None], what: str, *,
              exactly_once: bool = False) -> None:
    """Driver: log what is in Kafka despite the abort (0.7 has no way to remove it)."""
    done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
    stopped = sum(1 for m in done if m.error is not None)
    missing = sum(1 for m in messages if m is None)
    text = (
        f"kafka07 {what} aborted: {len(done)} of {len(messages)} tasks finished"
        + (f" ({stopped} of them stopped at a bad row)" if stopped else "")
        + "; what they wrote stays in Kafka (0.7 cannot take data back): "
        + fmt_written(merge(done))
    )
    if missing:
        text += (
            f". {missing} tasks failed: what they sent before failing may be partly in Kafka "
            "(each task's error itemises what was not confirmed); "
            + ("a re-run of the micro-batch sends only what did not land (exactly-once)"
               if exactly_once else "a rerun writes those rows again (at-least-once)")
        )
    log.warning("%s", text)


def fmt_sets(counts: Mapping[TopicPartition, tuple[int, int]]) -> str:
    if not counts:
        return "nothing"
    return ", ".join(
        f"topic {t!r} {partition_key(b, p)}: {sets} message sets, {nbytes} bytes"
        for (t, b, p), (sets, nbytes) in sorted(counts.items())
    )
