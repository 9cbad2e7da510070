"""``df.write.format("kafka07")`` and ``df.writeStream.format("kafka07")``: one engine, two faces.

Driver (the writer's ``__init__``, which Spark runs at ``save()``/``start()``, and for a
streaming query once per micro-batch): parse and check options and columns
(:mod:`~kafka_pyspark._spark.options.write_options`), then resolve the cluster into a
:class:`WritePlan` of picklable primitives: the live brokers and, per known topic, the sorted
(broker, partition) list 0.7's producer would use (:mod:`.plan`). Spark pickles the writer, plan
included, to the executors.

Executor (``write``, once per task, :class:`TaskWriter`): Arrow batches in ->

1. route every row to a broker-partition (vectorised, :mod:`.route` over
   :mod:`kafka_pyspark._partitioner`): explicit ``broker``/``partition`` columns, else the key's
   Java hash over the sorted list, else random (one random broker-partition per run of
   ``batch.size`` consecutive keyless rows of a topic, across Arrow batches);
2. (:mod:`.sets`) buffer per broker-partition and cut message sets of ``batch.size``
   messages, fewer where an uncompressed set would not fit one request or a compressed
   wrapper would exceed ``max.message.size`` (split in halves); one message that cannot fit is
   an error naming its row (:mod:`~kafka_pyspark._spark.write.sizes`);
3. MULTIPRODUCE per broker, up to about ``max.message.size`` + 1 MiB per request;
4. at the end, the delivery barrier on every connection used (an OFFSETS request answered on
   the same connection proves every earlier PRODUCE on it was appended);
5. (:mod:`.task`) return a :class:`Kafka07CommitMessage` (:mod:`.commit`) with per
   broker-partition message/byte counts.

Exactly-once (docs/writing.md "Exactly once"): between 2 and 3, :mod:`.delivery` records each
window's intent before sending it (:mod:`.store`, :mod:`.records`), a retry reads back what
landed (:mod:`.matcher`) and a ``done`` record makes a re-run a no-op.

Failures:

* a connection lost before its barrier answered: the task raises
  :class:`~kafka_pyspark.errors.BrokerConnectionError` saying how much data is unconfirmed and
  Spark retries the task. With ``delivery.guarantee=exactly-once`` (:mod:`.delivery`) the retry
  reads back what landed and sends only the rest; with ``at-least-once`` it may duplicate what
  the broker did append. Connecting is retried with backoff (bounded) while nothing was sent.
* bad data in a row (oversize message, null value, a key or explicit target with no valid
  partition): the task stops at that row, confirms what it already sent (barrier), and returns
  a commit message carrying the error. The driver's ``commit`` then raises it, naming the row,
  with a summary of everything every task wrote. No Spark retry: it could not succeed and would
  only write the rows before the bad one again.
* ``abort`` (a task failed) logs what is in Kafka anyway: 0.7 cannot take data back.
"""

from kafka_pyspark._spark.write.commit import Kafka07CommitMessage, abort_job, commit_job
from kafka_pyspark._spark.write.faces import Kafka07BatchWriter, Kafka07StreamWriter
from kafka_pyspark._spark.write.plan import WritePlan, build_plan, resolve_plan
from kafka_pyspark._spark.write.task import TaskWriter

__all__ = [
    "Kafka07BatchWriter",
    "Kafka07CommitMessage",
    "Kafka07StreamWriter",
    "TaskWriter",
    "WritePlan",
    "abort_job",
    "build_plan",
    "commit_job",
    "resolve_plan",
]
