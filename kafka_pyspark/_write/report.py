"""What a write task reports (:class:`WriteReport`) and how counts read in errors and logs
(``fmt_written``, ``fmt_sets``; ``merge`` adds up tasks). Spark's commit message is this report
(:class:`kafka_pyspark._spark.write.commit.Kafka07CommitMessage`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafka_pyspark._shared.partition_key import TopicPartition, partition_key
from kafka_pyspark.errors import KafkaError

__all__ = ["WriteReport", "fmt_sets", "fmt_written", "merge"]


@dataclass
class WriteReport:
    """What one write task did. ``written`` maps (topic, broker, partition) to (messages,
    message-set bytes, message sets), all confirmed by the delivery barrier. ``failure`` is set
    when the task stopped at a bad row (see :mod:`kafka_pyspark._write`): the error the
    driver raises, with context (it pickles whole, :class:`~kafka_pyspark.errors.KafkaError`);
    ``error``/``error_type`` are its text and class name. ``sink``: (sink id, batch id) of an
    exactly-once write (the driver deletes its records once committed), else None.
    ``records``: the record nodes the task knows it made (``<batch>/<partition>/<name>``, under
    the sink), which the driver deletes without listing the sink; None: not known (it lists)."""

    task: str
    rows: int
    written: dict[TopicPartition, tuple[int, int, int]] = field(default_factory=dict)
    failure: KafkaError | None = None
    sink: tuple[str, int] | None = None
    records: tuple[str, ...] | None = None

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


def merge(messages: Iterable[WriteReport]) -> dict[TopicPartition, tuple[int, int, int]]:
    total: dict[TopicPartition, tuple[int, int, int]] = {}
    for msg in messages:
        for t, (m, n, s) in msg.written.items():
            pm, pn, ps = total.get(t, (0, 0, 0))
            total[t] = (pm + m, pn + n, ps + s)
    return total


def fmt_sets(counts: Mapping[TopicPartition, tuple[int, int]]) -> str:
    if not counts:
        return "nothing"
    return ", ".join(
        f"topic {t!r} {partition_key(b, p)}: {sets} message sets, {nbytes} bytes"
        for (t, b, p), (sets, nbytes) in sorted(counts.items())
    )
