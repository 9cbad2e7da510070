"""The batch reader: ``spark.read.format("kafka07")`` (the driver side; executors run
:func:`.executor.read_partition`).

Driver (the planning Python worker Spark starts at ``load()``/action time):
``Kafka07BatchReader.__init__`` parses the options (:mod:`~kafka_pyspark._options`);
``pushFilters`` records what planning can use (:func:`.planning.plan_filter`; only where Spark keeps
the plan to that one query, see :mod:`.pushdown`); ``partitions()`` (:func:`plan_batch`) has an
:class:`~.offset_reader.OffsetReader` discover the broker-partitions (:mod:`.discovery`, strict)
and ask OFFSETS for their bounds (:mod:`.log_bounds`), resolves starts and ends
(:mod:`.start_end`), fixes every range's end (the read is a snapshot) and plans
(:func:`.planning.plan_partitions`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from kafka_pyspark._options import ReadOptions, parse_read_options
from kafka_pyspark._spark import worker_gc
from kafka_pyspark._spark.read import pushdown
from kafka_pyspark._spark.read.executor import read_partition
from kafka_pyspark._spark.read.offset_reader import OffsetReader
from kafka_pyspark._spark.read.planning import (
    Kafka07InputPartition,
    PlanFilter,
    TaskSettings,
    plan_partitions,
)
from kafka_pyspark._spark.read.start_end import resolve_ends
from kafka_pyspark._spark.schema import READ_SCHEMA
from kafka_pyspark.client import OffsetRange
from kafka_pyspark.errors import SchemaError

__all__ = ["Kafka07BatchReader", "plan_batch"]


def plan_batch(
    options: ReadOptions, pushed: PlanFilter | None = None
) -> list[Kafka07InputPartition]:
    """Discover, resolve offsets (a snapshot of the log ends) and plan, every round trip by one
    :class:`~.offset_reader.OffsetReader` (bounded I/O)."""
    with OffsetReader(options) as offsets:
        # with ZooKeeper and no broker registered (a wrong chroot, usually) this fails saying
        # so, not as "no topic"
        discovered, brokers = offsets.view()
        tps = discovered
        if pushed is not None:
            tps = [tp for tp in tps if pushed.accepts(*tp)]
        starts, bounds = offsets.starts(tps, known=discovered)
    ends = resolve_ends(
        options.ending,
        tps,
        bounds,
        starts,
        fail_on_data_loss=options.fail_on_data_loss,
        known=discovered,
    )
    ranges = [OffsetRange(t, b, p, starts[(t, b, p)], ends[(t, b, p)]) for t, b, p in tps]
    return plan_partitions(
        ranges,
        {b: (a.host, a.port) for b, a in brokers.items()},
        options.fetch,
        TaskSettings.of(options),
        segment_starts={tp: bounds[tp].segment_starts for tp in tps},
        min_partitions=options.min_partitions,
        pushed=pushed,
    )


class Kafka07BatchReader(pushdown.FilteredReader):
    """``spark.read.format("kafka07")``: options are checked here, on the driver."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_read_options(options, "batch")
        if schema != READ_SCHEMA:
            raise SchemaError(
                "kafka07 has a fixed read schema (topic, broker, partition, offset, "
                f"next_offset, inner_index, compression, value); do not pass .schema(): got "
                f"{schema.simpleString()}"
            )
        super().__init__()

    def partitions(self) -> list[InputPartition]:
        return list(plan_batch(self.options, self.pushed.plan))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        worker_gc.settle()
        return read_partition(partition)
