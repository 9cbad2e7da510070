"""The Spark faces of the write engine: ``df.write`` and ``df.writeStream`` with
``format("kafka07")``. Both build a :class:`~.plan.WritePlan` on the driver, run a
:class:`~.task.TaskWriter` per task and commit or abort on the driver (:mod:`.commit`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from kafka_pyspark._spark.compat import StreamArrowWriter
from kafka_pyspark._spark.write.commit import Kafka07CommitMessage, abort_job, commit_job
from kafka_pyspark._spark.write.plan import build_plan
from kafka_pyspark.errors import OptionError

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from kafka_pyspark._spark.write.plan import WritePlan
    from kafka_pyspark._spark.write.task import TaskWriter


def _task_writer(plan: WritePlan, task: str) -> TaskWriter:
    """An executor's :class:`~.task.TaskWriter`, imported here: the planner processes that only
    build the plan or commit (a fresh Python each, at every first write of a session) never
    import the routing and encoding modules."""
    from kafka_pyspark._spark.write.task import TaskWriter

    return TaskWriter(plan, task=task)


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

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        return _task_writer(self.plan, _task_label()).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_job(messages, "write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
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
        return _task_writer(self.plan, _task_label()).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_job(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_job(messages, f"micro-batch {batchId}")
