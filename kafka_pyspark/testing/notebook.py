"""Stand-ins for a Databricks notebook's globals, so the same notebook runs anywhere.

::

    import os

    if "DATABRICKS_RUNTIME_VERSION" in os.environ:
        nb, VOLUMES = None, "/Volumes"
    else:  # Jupyter, VS Code, or `.venv/bin/python notebooks/01_batch_ingest.py`
        from kafka_pyspark.testing.notebook import LocalNotebook

        nb = LocalNotebook("01_batch_ingest").start()
        spark, dbutils, display, VOLUMES = nb.spark, nb.dbutils, nb.display, nb.volumes
    ...
    if nb is not None:
        nb.close()

:class:`LocalNotebook` starts a :class:`~kafka_pyspark.testing._local.LocalCluster` (ZooKeeper,
embedded 0.7 brokers, Spark) and gives:

- ``dbutils.widgets``: ``text``, ``dropdown``, ``get``, ``getAll``, ``removeAll``. A widget's
  value is its default, except for the names in :attr:`LocalNotebook.values`: ``zk_connect``
  (the local ZooKeeper), ``catalog`` and ``schema`` (the local stand-in for a Unity Catalog
  schema below) and ``write_test_messages`` (``yes``: the local topics start empty), plus
  whatever the constructor's ``widgets`` sets.
- a schema: the database ``spark_catalog.<schema>`` with its tables in the temporary directory,
  so ``f"{catalog}.{schema}.{table}"`` names a table exactly as a Unity Catalog name does.
- ``volumes``: a temporary directory standing in for ``/Volumes`` (checkpoints).
- ``display(obj)``: a Spark or pandas DataFrame is printed as a table (shown as one in Jupyter);
  a matplotlib figure is saved to ``<figures_dir>/<name>-<n>.png`` (``figures_dir``: the
  constructor's, else ``$KAFKA07_FIGURES_DIR``, else ``./figures``) and the path printed.

:meth:`LocalNotebook.close` drops the database and undoes what the cluster started.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_pyspark._shared.closing import Service
from kafka_pyspark.testing._local import LocalCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalDbutils", "LocalNotebook", "LocalWidgets"]

#: where figures go when neither the constructor nor $KAFKA07_FIGURES_DIR says
DEFAULT_FIGURES_DIR = "figures"
FIGURES_ENV = "KAFKA07_FIGURES_DIR"
#: rows a Spark DataFrame shows (Databricks' display shows up to 10,000 in a scrollable table)
DISPLAY_ROWS = 20


class LocalWidgets:
    """``dbutils.widgets`` outside Databricks (Databricks' method and argument names): every
    widget answers its default unless ``values`` gives it another value."""

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self.values = dict(values or {})
        self._defaults: dict[str, str] = {}

    def text(self, name: str, defaultValue: str, label: str | None = None) -> None:
        self._defaults[name] = str(defaultValue)

    def dropdown(
        self, name: str, defaultValue: str, choices: Sequence[str], label: str | None = None
    ) -> None:
        value = self.values.get(name, defaultValue)
        if defaultValue not in choices or value not in choices:
            raise ValueError(f"widget {name!r}: {value!r} is not one of {list(choices)}")
        self._defaults[name] = str(defaultValue)

    def get(self, name: str) -> str:
        if name not in self._defaults:
            raise KeyError(f"widget {name!r} is not defined (dbutils.widgets.text/dropdown first)")
        return self.values.get(name, self._defaults[name])

    def getAll(self) -> dict[str, str]:
        return {name: self.get(name) for name in self._defaults}

    def removeAll(self) -> None:
        self._defaults.clear()


class LocalDbutils:
    """The part of ``dbutils`` the notebooks use: ``widgets``."""

    def __init__(self, widgets: LocalWidgets) -> None:
        self.widgets = widgets


class LocalNotebook(Service):
    """A local cluster plus the notebook globals above; ``name`` names the schema and figures."""

    def __init__(
        self,
        name: str,
        *,
        partitions: Sequence[int] = (2, 3),
        widgets: Mapping[str, str] | None = None,
        figures_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.cluster = LocalCluster(partitions=partitions, app_name=name)
        self.schema = "kafka07_" + re.sub(r"\W", "_", name.lower())
        self.dbutils = LocalDbutils(LocalWidgets(widgets))
        self._figures_dir = figures_dir
        self.figures: list[Path] = []
        self._schema_created = False

    @property
    def spark(self) -> SparkSession:
        return self.cluster.spark

    @property
    def volumes(self) -> str:
        """The directory standing in for ``/Volumes``."""
        return self.cluster.path("Volumes")

    @property
    def figures_dir(self) -> Path:
        return Path(self._figures_dir or os.environ.get(FIGURES_ENV) or DEFAULT_FIGURES_DIR)

    def start(self) -> LocalNotebook:
        self.cluster.start()
        try:
            warehouse = self.cluster.path("warehouse")
            # no IF NOT EXISTS: a database of that name in this session is someone's data
            self.spark.sql(f"CREATE DATABASE spark_catalog.{self.schema} LOCATION '{warehouse}'")
            self._schema_created = True
            local = {
                "zk_connect": self.cluster.zk_connect,
                "catalog": "spark_catalog",
                "schema": self.schema,
                "write_test_messages": "yes",
            }
            self.dbutils.widgets.values = {**local, **self.dbutils.widgets.values}
        except BaseException:
            self.close()
            raise
        return self

    def wait_for_topic(self, topic: str) -> None:
        """Until every local broker has registered ``topic`` (they do so after its first write)."""
        for broker in self.cluster.brokers:
            broker.wait_for_topic(topic)

    def display(self, obj: Any) -> None:
        """Databricks' ``display`` outside Databricks (see the module docstring)."""
        if hasattr(obj, "savefig"):
            self.figures_dir.mkdir(parents=True, exist_ok=True)
            path = self.figures_dir / f"{self.name}-{len(self.figures) + 1}.png"
            obj.savefig(path)
            self.figures.append(path)
            print(f"figure saved to {path.resolve()}")
            return
        if hasattr(obj, "toPandas") and hasattr(obj, "show"):  # a Spark DataFrame
            if not _in_jupyter():
                obj.show(DISPLAY_ROWS, truncate=False)
                return
            obj = obj.limit(DISPLAY_ROWS).toPandas()
        if _in_jupyter():
            importlib.import_module("IPython.display").display(obj)
        elif hasattr(obj, "to_string"):  # pandas
            print(obj.to_string())
        else:
            print(obj)

    def close(self) -> None:
        """Drop the schema, then stop what the cluster started and remove its directory."""
        try:
            if self._schema_created:
                self._schema_created = False
                self.spark.sql(f"DROP DATABASE IF EXISTS spark_catalog.{self.schema} CASCADE")
        finally:
            self.cluster.close()


def _in_jupyter() -> bool:
    """Whether this runs in an IPython kernel with rich display (Jupyter, VS Code)."""
    try:
        shell = importlib.import_module("IPython").get_ipython()
    except ImportError:
        return False
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"
