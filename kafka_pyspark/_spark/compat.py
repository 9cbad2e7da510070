"""What the installed pyspark's Python DataSource API offers: the one place that knows.

The connector runs on pyspark 4.0 and later. Batch reads (Arrow batches from ``read()``),
batch writes (``DataSourceArrowWriter``) and streaming reads and writes exist since 4.0;
later versions added what the connector uses when it is there (``docs/running.md`` has the
table users see):

* :data:`FILTER_PUSHDOWN` (4.1): ``DataSourceReader.pushFilters`` and the ``Filter`` classes.
  Without it the reader offers no pushdown and Spark filters every row itself.
* :data:`STREAM_ARROW_WRITER` (4.1): ``DataSourceStreamArrowWriter``. Spark 4.0 hands Arrow
  batches to any writer that is a ``DataSourceArrowWriter``, streaming or not, so the stream
  writer derives from that class there (:class:`StreamArrowWriter`).
* :data:`ADMISSION_CONTROL` (4.2): ``latestOffset(start, limit)``, ``getDefaultReadLimit``,
  ``reportLatestOffset`` and ``SupportsTriggerAvailableNow``
  (``pyspark.sql.streaming.datasource``). Without it the stream reader is
  :class:`~kafka_pyspark._spark.stream.legacy_reader.Kafka07LegacyStreamReader`, which keeps
  each micro-batch's start itself and applies ``maxBytesPerTrigger`` on its own; Spark runs
  ``Trigger.AvailableNow`` as one micro-batch there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyspark
from pyspark.sql import datasource as _ds

__all__ = [
    "ADMISSION_CONTROL",
    "FILTER_PUSHDOWN",
    "SPARK_VERSION",
    "STREAM_ARROW_WRITER",
    "EqualTo",
    "Filter",
    "GreaterThan",
    "GreaterThanOrEqual",
    "In",
    "LessThan",
    "LessThanOrEqual",
    "Not",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "StreamArrowWriter",
    "SupportsTriggerAvailableNow",
]

SPARK_VERSION: str = pyspark.__version__

FILTER_PUSHDOWN: bool = hasattr(_ds.DataSourceReader, "pushFilters")
STREAM_ARROW_WRITER: bool = hasattr(_ds, "DataSourceStreamArrowWriter")

if TYPE_CHECKING or STREAM_ARROW_WRITER:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamArrowWriter
else:  # pyspark 4.0 gives Arrow batches to every DataSourceArrowWriter, streaming or not

    class StreamArrowWriter(_ds.DataSourceStreamWriter, _ds.DataSourceArrowWriter):
        """A stream writer that Spark 4.0 feeds Arrow batches."""

if FILTER_PUSHDOWN:
    from pyspark.sql.datasource import (
        EqualTo,
        Filter,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        LessThan,
        LessThanOrEqual,
        Not,
    )
else:  # pyspark 4.0: the names planning matches on, never instantiated (nothing is pushed)

    class Filter:  # type: ignore[no-redef]
        """Stand-in for pyspark 4.1's ``Filter``."""

    class EqualTo(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class GreaterThan(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class GreaterThanOrEqual(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class In(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class LessThan(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class LessThanOrEqual(Filter):  # type: ignore[no-redef]
        """Stand-in."""

    class Not(Filter):  # type: ignore[no-redef]
        """Stand-in."""

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL = True
except ImportError:  # pyspark < 4.2: the same names, never seen by Spark
    ADMISSION_CONTROL = False

    class ReadLimit:  # type: ignore[no-redef]
        """Stand-in for pyspark 4.2's ``ReadLimit`` (what a micro-batch may read)."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        """Everything available."""

    @dataclass
    class ReadMaxBytes(ReadLimit):  # type: ignore[no-redef]
        """At most ``max_bytes`` bytes."""

        max_bytes: int

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: Spark < 4.2 never calls ``prepareForTriggerAvailableNow``."""

        def prepareForTriggerAvailableNow(self) -> None:
            raise NotImplementedError

