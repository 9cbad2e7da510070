"""The write engine, free of Spark: Arrow batches in, confirmed 0.7 message sets out.

``df.write``/``df.writeStream`` (:mod:`kafka_pyspark._spark.write`, the Spark faces and the
driver's commit), ``kafka07 produce`` and the benchmark all write through :class:`TaskWriter`.

Driver: :func:`~.plan.resolve_plan` turns the parsed options
(:mod:`kafka_pyspark._options.write_options`), the column layout
(:mod:`kafka_pyspark._options.write_columns`) and a cluster view into a picklable
:class:`WritePlan`: the live brokers and, per known topic, the sorted (broker, partition) list
0.7's producer would use.

Executor (:class:`TaskWriter`, :mod:`.task`), per task:

1. route every row to a broker-partition (vectorised, :mod:`.route` over
   :mod:`kafka_pyspark._partitioner`): explicit ``broker``/``partition`` columns, else the key's
   Java hash over the sorted list, else random (one random broker-partition per run of
   ``batch.size`` consecutive keyless rows of a topic, across Arrow batches);
2. (:mod:`.sets`) buffer per broker-partition and cut message sets of ``batch.size``
   messages, fewer where an uncompressed set would not fit one request or a compressed
   wrapper would exceed ``max.message.size`` (split in halves); one message that cannot fit is
   an error naming its row (:mod:`.sizes`);
3. MULTIPRODUCE per broker (:class:`kafka_pyspark.client.Producer`), up to about
   ``max.message.size`` + 1 MiB per request;
4. at the end, the delivery barrier on every connection used (an OFFSETS request answered on
   the same connection proves every earlier PRODUCE on it was appended);
5. return a :class:`WriteReport` (:mod:`.report`) with per broker-partition message/byte
   counts.

Exactly-once (docs/writing.md "Exactly once"): between 2 and 3, :mod:`.delivery` records each
window's intent before sending it (:mod:`.store`, :mod:`.records`), a retry reads back what
landed (:mod:`.matcher` over :mod:`.digest`) and a ``done`` record makes a re-run a no-op; the
task's identity is :class:`~.identity.TaskIdentity`; :mod:`.faults` holds the fault points.

Failures:

* a connection lost before its barrier answered: the task raises
  :class:`~kafka_pyspark.errors.BrokerConnectionError` saying how much data is unconfirmed (the
  caller retries: Spark retries the task). With ``delivery.guarantee=exactly-once`` the retry
  reads back what landed and sends only the rest; with ``at-least-once`` it may duplicate what
  the broker did append. Connecting is retried with backoff (bounded) while nothing was sent.
* bad data in a row (oversize message, null value, a key or explicit target with no valid
  partition): the task stops at that row, confirms what it already sent (barrier), and returns
  a report carrying the error (the Spark driver's commit raises it, naming the row).

Other layers import the names below from this package; the rest is the modules' own.
"""

from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.plan import WritePlan, resolve_plan
from kafka_pyspark._write.report import WriteReport
from kafka_pyspark._write.task import TaskWriter

__all__ = ["TaskIdentity", "TaskWriter", "WritePlan", "WriteReport", "resolve_plan"]
