"""Which write a task is: ``(sink, batch, partition)``, the key of its exactly-once records.

A streaming task: sink = the query id (Spark's local property ``sql.streaming.queryId``, the
same after a restart from the checkpoint), batch = the micro-batch id
(``streaming.sql.batchId``), partition = the task's partition id. A batch ``df.write``: sink =
a job id made on the driver when the writer is created (pickled with it to every task), batch
0: retries and speculative copies of a task in one job share it; a second ``save()`` is a
second write. A Spark task finds its own with
:func:`kafka_pyspark._spark.write.faces.spark_identity`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["TaskIdentity"]


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
