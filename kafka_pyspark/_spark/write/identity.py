"""Which write a task is: ``(sink, batch, partition)``, the key of its exactly-once records.

A streaming task: sink = the query id (Spark's local property ``sql.streaming.queryId``, the
same after a restart from the checkpoint), batch = the micro-batch id
(``streaming.sql.batchId``), partition = the task's partition id. A batch ``df.write``: sink =
a job id made on the driver when the writer is created (pickled with it to every task), batch
0: retries and speculative copies of a task in one job share it; a second ``save()`` is a
second write.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["BATCH_ID_PROPERTY", "QUERY_ID_PROPERTY", "TaskIdentity", "spark_identity"]

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class TaskIdentity:
    """One task of one write: what its records are keyed by."""

    sink: str
    batch: int
    partition: int

    @property
    def seed(self) -> int:
        """The seed of its keyless rows' random runs: the same on every attempt."""
        digest = hashlib.sha256(f"{self.sink}/{self.batch}/{self.partition}".encode()).digest()
        return int.from_bytes(digest[:8], "big")

    def describe(self) -> str:
        return f"sink {self.sink} batch {self.batch} partition {self.partition}"


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
        return TaskIdentity(job, 0, ctx.partitionId())
    query, batch = ctx.getLocalProperty(QUERY_ID_PROPERTY), ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if query and batch is not None:
        return TaskIdentity(str(query), int(batch), ctx.partitionId())
    return None
