"""A write task's report as Spark's commit message (:class:`Kafka07CommitMessage`) and what the
driver does with the reports: log the summary, raise the first task's data error
(``commit_job``), log what stays in Kafka after a failure (``abort_job``)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from kafka_pyspark._write.report import WriteReport, fmt_written, merge
from kafka_pyspark.errors import with_context

log = logging.getLogger(__name__)


@dataclass
class Kafka07CommitMessage(WriteReport, WriterCommitMessage):
    """A task's :class:`~kafka_pyspark._write.report.WriteReport`, as Spark's commit message."""

    @classmethod
    def of(cls, report: WriteReport) -> Kafka07CommitMessage:
        return cls(**{f.name: getattr(report, f.name) for f in dataclasses.fields(report)})


def commit_job(messages: Sequence[WriterCommitMessage | WriteReport | None], what: str) -> None:
    """Driver: log the summary; raise the first task's data error, if any (with the summary)."""
    done = [m for m in messages if isinstance(m, WriteReport)]
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


def abort_job(messages: Sequence[WriterCommitMessage | WriteReport | None], what: str, *,
              exactly_once: bool = False) -> None:
    """Driver: log what is in Kafka despite the abort (0.7 has no way to remove it)."""
    done = [m for m in messages if isinstance(m, WriteReport)]
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
