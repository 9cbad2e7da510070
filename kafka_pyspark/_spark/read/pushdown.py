"""Filter pushdown of the batch reader across Spark versions (the workarounds in one place).

Two facts of Spark's Python data source API decide how ``Kafka07BatchReader.pushFilters``
behaves; both are version-dependent, and both live here so that the reader stays plain:

* :data:`NARROW_PLAN`: whether a plan narrowed by one query's filters stays with that query.
* :class:`PushFilters`: how the reader offers ``pushFilters`` without Spark refusing to plan
  the source when ``spark.sql.python.filterPushdown.enabled`` is false (Spark's default).

:class:`FilteredReader` is the base of both batch readers (brokers, segment files): it holds
their :class:`PushFilters`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pyspark.sql.datasource import DataSourceReader

from kafka_pyspark._spark.compat import Filter
from kafka_pyspark._spark.read.planning import PlanFilter, plan_filter

__all__ = ["NARROW_PLAN", "FilteredReader", "PushFilters", "split"]

#: Whether the read plan made while Spark pushes filters belongs to that one scan. Spark 4.3
#: keeps it on the relation (``PythonScanBuilder.pushFilters`` -> ``PythonDataSourceV2
#: .setReadInfo``) and reuses it for every later scan of the same DataFrame that pushes no filter
#: (``df.where("broker = 1").count(); df.count()`` counts broker 1 only). A plan narrowed by one
#: query's filters would silently drop rows from the next, so the plan is narrowed only where
#: Spark scopes it to the scan: upstream did so in the change that added Python limit pushdown
#: (SPARK-58551, ``DataSourceReader.pushLimit``), which is what is tested for here.
NARROW_PLAN = hasattr(DataSourceReader, "pushLimit")


def split(filters: Iterable[Filter]) -> tuple[PlanFilter | None, list[Filter]]:
    """What planning may use of ``filters`` (:func:`.planning.plan_filter`) and the filters
    Spark must still apply. Where Spark would reuse the plan for other scans
    (:data:`NARROW_PLAN` false), nothing is pushed: every filter stays with Spark and the plan
    stays whole."""
    if not NARROW_PLAN:
        return None, list(filters)
    return plan_filter(filters)


class PushFilters:
    """``reader.pushFilters`` as a callable that Spark's planner does not see as an override;
    it keeps what planning may use (:attr:`plan`).

    Spark 4 refuses to plan a Python data source whose reader overrides ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false (``DATA_SOURCE_PUSHDOWN_DISABLED``),
    and it tells by ``reader.pushFilters.__func__ is DataSourceReader.pushFilters``. The reader
    is correct without pushdown (every filter is optional to it), so it must keep working with
    the default configuration: the attribute carries the base ``__func__`` and, when pushdown
    is on and Spark calls it, records the plan filter (:func:`split`) and returns the filters
    Spark must still apply. Spark 4.0 has no filter pushdown
    (:data:`~kafka_pyspark._spark.compat.FILTER_PUSHDOWN`) and never calls it.
    """

    __func__ = staticmethod(getattr(DataSourceReader, "pushFilters", lambda *_: ()))

    def __init__(self) -> None:
        self.plan: PlanFilter | None = None

    def __call__(self, filters: list[Filter]) -> Iterable[Filter]:
        self.plan, rest = split(filters)
        return rest


class FilteredReader(DataSourceReader):
    """A batch reader whose planning may use the filters Spark pushes (:attr:`pushed`, its
    :class:`PushFilters`, offered as ``pushFilters``)."""

    def __init__(self) -> None:
        self.pushed = PushFilters()

    @property
    def pushFilters(self) -> Callable[[list[Filter]], Iterable[Filter]]:
        return self.pushed
