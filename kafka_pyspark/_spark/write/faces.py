"""The Spark faces of the write engine: ``df.write`` and ``df.writeStream`` with
``format("kafka07")``. Both build a :class:`~kafka_pyspark._write.WritePlan` on the driver
(:mod:`.driver`), run a :class:`~kafka_pyspark._write.TaskWriter` per task (its identity from
the Spark task: :func:`spark_identity`) and commit or abort on the driver (:mod:`.commit`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from kafka_pyspark._spark import worker_gc
from kafka_pyspark._spark.compat import StreamArrowWriter
from kafka_pyspark._spark.write.commit import Kafka07CommitMessage, abort_job, commit_job
from kafka_pyspark._spark.write.driver import build_plan
from kafka_pyspark._write import TaskIdentity, TaskWriter, WritePlan
from kafka_pyspark._write.faults import fault_point
from kafka_pyspark._write.store import open_store
from kafka_pyspark.errors import OptionError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: the batch id of a batch job's tasks (their sink is the job)
JOB_BATCH = 0


def spark_identity(job: str | None) -> TaskIdentity | None:
    """The running Spark task's identity: a batch job's (``job``, given by the batch writer),
    else a stream's from its local properties; None outside a Spark task, or in a stream task
    without them.

    A batch write always uses its job id, even inside ``foreachBatch`` (whose jobs inherit the
    stream's local properties): two writes in one micro-batch must not share records."""
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except Exception:  # pragma: no cover - no Spark on this path
        ctx = None
    if ctx is None:
        return None
    if job is not None:
        return TaskIdentity(job, JOB_BATCH, ctx.partitionId())
    query, batch = ctx.getLocalProperty(QUERY_ID_PROPERTY), ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if query and batch is not None:
        return TaskIdentity(str(query), int(batch), ctx.partitionId())
    return None


def _task_label() -> str:
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except Exception:  # pragma: no cover - no Spark on this path
        ctx = None
    if ctx is None:
        return "write task"
    return (
        f"write task for Spark partition {ctx.partitionId()} (stage {ctx.stageId()}, "
        f"attempt {ctx.attemptNumber()})"
    )


def _sinks(messages: Sequence[WriterCommitMessage | None]) -> set[str]:
    """The exactly-once sink ids the tasks' commit messages name."""
    return {m.sink[0] for m in messages if isinstance(m, Kafka07CommitMessage) and m.sink}


def _prepare(plan: WritePlan, sink: str) -> None:
    """An exactly-once batch job's node, made on the driver before its tasks start (as a
    stream's next micro-batch's is at each commit): each task then claims in one request, not
    two. Best effort: a task makes what is missing."""
    d = plan.options.delivery
    if not d.exactly_once:
        return
    try:
        open_store(plan.cluster, d.zk_root, d.store).prepare(sink, JOB_BATCH)
    except Exception as e:
        log.warning("kafka07 sink: could not make the exactly-once node of %s ahead of its "
                    "tasks (they make it): %s", sink, e)


def _forget(plan: WritePlan, messages: Sequence[WriterCommitMessage | None],
            below: int | None, also: str | None = None) -> None:
    """Delete the records of the write's sinks (below a batch id, or all), and those of the
    sink ``also`` (a batch job's, made ahead) even if no task named it: best effort, a
    failure is logged (the next commit deletes them). A whole sink whose every task named its
    records goes in one round, else it is listed first. For a stream, the next micro-batch's
    node is made ahead: its tasks then claim in one request."""
    d = plan.options.delivery
    sinks = _sinks(messages) | ({also} if also is not None else set())
    if not d.exactly_once or not sinks:
        return
    try:
        store = open_store(plan.cluster, d.zk_root, d.store)
        for sink in sorted(sinks):
            records = _records(messages, sink) if below is None else None
            if not records:  # not known (or none: a job whose tasks wrote nothing)
                store.forget(sink, below)
            else:
                store.forget_records(sink, records)
            if below is not None:  # a stream's next micro-batch: its node made ahead
                store.prepare(sink, below + 1)
    except Exception as e:  # the data is committed; records left behind only take space
        log.warning("kafka07 sink: could not delete the exactly-once records of %s: %s",
                    ", ".join(sorted(sinks)), e)


def _records(messages: Sequence[WriterCommitMessage | None], sink: str) -> list[str] | None:
    """The record nodes of ``sink`` its tasks' reports name; None if a report does not know."""
    out: list[str] = []
    for m in messages:
        if not isinstance(m, Kafka07CommitMessage):
            return None
        if m.sink is not None and m.sink[0] == sink:
            if m.records is None:
                return None
            out.extend(m.records)
    return out


def _identity_missing(plan: WritePlan) -> None:
    if plan.options.delivery.exactly_once:
        log.warning("kafka07 sink: this Spark task has no stream query id or batch id; it "
                    "writes at-least-once")


class Kafka07BatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafka07")``: Arrow batches in, 0.7 MULTIPRODUCE out."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError(
                "mode",
                "overwrite is not possible: Kafka 0.7 topics are append-only logs; use "
                "mode('append')",
            )
        self.plan = build_plan(options, schema)
        #: the job's id: the sink of its exactly-once records (made here, on the driver, and
        #: pickled with the writer: every task and attempt of this job shares it)
        self.job = f"job-{uuid.uuid4().hex}"
        _prepare(self.plan, self.job)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        worker_gc.settle(writing=True)
        ident = spark_identity(self.job)
        if ident is None:
            _identity_missing(self.plan)
        report = TaskWriter(self.plan, task=_task_label(), identity=ident).write(iterator)
        return Kafka07CommitMessage.of(report)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        worker_gc.settle()  # Spark runs it in a reused Python worker too
        fault_point("before-commit")
        _forget(self.plan, messages, None, also=self.job)
        commit_job(messages, "write")
        fault_point("during-commit")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        worker_gc.settle()  # Spark runs it in a reused Python worker too
        _forget(self.plan, messages, None, also=self.job)
        abort_job(messages, "write")


class Kafka07StreamWriter(StreamArrowWriter):
    """``df.writeStream.format("kafka07")``: the same engine per micro-batch.

    Spark creates this writer on the driver for every micro-batch (and again to commit it),
    so the plan - live brokers, partitions per topic - is refreshed from the registry each
    micro-batch: a topic written for the first time to partition 0 of every broker is written
    to all its partitions once the brokers have registered them.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        # overwrite is Spark's "complete" output mode: every row of the result is appended to
        # the topic each micro-batch, as Spark's Kafka sink does.
        self.plan = build_plan(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        worker_gc.settle(writing=True)
        ident = spark_identity(None)
        if ident is None:
            _identity_missing(self.plan)
        report = TaskWriter(self.plan, task=_task_label(), identity=ident).write(iterator)
        return Kafka07CommitMessage.of(report)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        worker_gc.settle()  # Spark runs it in a reused Python worker too
        # Records of earlier micro-batches go; this one's stay: a driver killed after this
        # commit and before Spark's commit log runs the micro-batch again, and its "done"
        # records make that a no-op. abort keeps everything for the re-run.
        fault_point("before-commit")
        _forget(self.plan, messages, batchId)
        commit_job(messages, f"micro-batch {batchId}")
        fault_point("during-commit")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        worker_gc.settle()  # Spark runs it in a reused Python worker too
        abort_job(messages, f"micro-batch {batchId}",
                  exactly_once=self.plan.options.delivery.exactly_once)
