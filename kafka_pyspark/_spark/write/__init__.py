"""``df.write.format("kafka07")`` and ``df.writeStream.format("kafka07")``: the Spark faces of
the write engine (:mod:`kafka_pyspark._write`, free of Spark).

- :mod:`.driver`: the writer's ``__init__`` on the driver (Spark runs it at
  ``save()``/``start()``, and for a streaming query once per micro-batch): the DataFrame's
  schema as the writer's columns, the options, the :class:`~kafka_pyspark._write.WritePlan`
  (:func:`build_plan`) Spark pickles to the executors;
- :mod:`.faces`: :class:`Kafka07BatchWriter` and :class:`Kafka07StreamWriter`; ``write`` runs
  one :class:`~kafka_pyspark._write.TaskWriter` per task, with the task's exactly-once identity
  from Spark's ``TaskContext``;
- :mod:`.commit`: the task's report as Spark's commit message (:class:`Kafka07CommitMessage`),
  and the driver's ``commit``/``abort``.

Failures, as Spark sees them (the engine's side: :mod:`kafka_pyspark._write`):

* a connection lost before its barrier answered: the task raises
  :class:`~kafka_pyspark.errors.BrokerConnectionError` and Spark retries the task.
* bad data in a row: the task returns a commit message carrying the error; the driver's
  ``commit`` raises it, naming the row, with a summary of everything every task wrote. No Spark
  retry: it could not succeed and would only write the rows before the bad one again.
* ``abort`` (a task failed) logs what is in Kafka anyway: 0.7 cannot take data back.
"""

from kafka_pyspark._spark.write.commit import Kafka07CommitMessage, abort_job, commit_job
from kafka_pyspark._spark.write.driver import build_plan
from kafka_pyspark._spark.write.faces import Kafka07BatchWriter, Kafka07StreamWriter

__all__ = [
    "Kafka07BatchWriter",
    "Kafka07CommitMessage",
    "Kafka07StreamWriter",
    "abort_job",
    "build_plan",
    "commit_job",
]
