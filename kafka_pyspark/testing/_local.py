"""A whole local Kafka 0.7 cluster and Spark for notebooks run outside Databricks.

::

    from kafka_pyspark.testing._local import LocalCluster

    local = LocalCluster(partitions=(2, 3)).start()   # ZooKeeper + one broker per entry
    spark, zk = local.spark, local.zk_connect
    ...
    local.close()   # Spark (if it started it), brokers, ZooKeeper, the temporary directory

The SparkSession is the active one if there is one (a notebook kernel that already has Spark,
a test session); otherwise a new ``local[2]`` whose Python workers run this interpreter
(``PYSPARK_PYTHON``, unless set, and ``spark.pyspark.python`` = ``sys.executable``): without
that a Jupyter kernel's workers run whatever ``python3`` is on the PATH and fail with
``ModuleNotFoundError: No module named 'kafka_pyspark'``. Only what it started is stopped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_pyspark._shared.closing import Service
from kafka_pyspark.testing.cluster import DEFAULT_CHROOT, LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalCluster", "local_spark"]

#: the Spark warehouse of a session started here, inside the cluster's directory
WAREHOUSE = "spark-warehouse"

#: settings of a Spark this module starts (spark-conf/spark-defaults.conf has the same)
SPARK_CONF = {
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def local_spark(
    app_name: str = "kafka07-local", *, warehouse: str | None = None
) -> tuple[SparkSession, bool]:
    """The active SparkSession, or a new local one with the right Python (and its
    ``spark.sql.warehouse.dir`` at ``warehouse``, so that no ``spark-warehouse/`` appears in
    the working directory); and whether it is new (the caller then stops it)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    # Python data sources and UDFs run the interpreter SparkContext finds in PYSPARK_PYTHON
    # when it starts (default "python3"); spark.pyspark.python alone does not reach them
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    conf = {**SPARK_CONF, **({"spark.sql.warehouse.dir": warehouse} if warehouse else {})}
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, True


class LocalCluster(Service):
    """A :class:`~kafka_pyspark.testing.cluster.LocalKafka` (ZooKeeper, embedded brokers with
    ids 0, 1, ... and ``partitions[i]`` partitions each, under ``chroot``) and Spark, all in one
    temporary directory; :meth:`close` undoes everything it started."""

    def __init__(
        self,
        *,
        partitions: Sequence[int] = (2, 3),
        app_name: str = "kafka07",
        chroot: str = DEFAULT_CHROOT,
    ) -> None:
        self.partitions = tuple(partitions)
        self.app_name = app_name
        self.kafka = LocalKafka(brokers=len(self.partitions), partitions=self.partitions,
                                chroot=chroot)
        self._spark: SparkSession | None = None
        self._stack = contextlib.ExitStack()

    @property
    def tmp(self) -> Path | None:
        """The cluster's temporary directory (removed by :meth:`close`)."""
        return self.kafka.tmp

    @property
    def zk_connect(self) -> str:
        return self.kafka.zk_connect

    @property
    def brokers(self) -> list[Any]:
        return self.kafka.brokers

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            raise RuntimeError("LocalCluster is not started")
        return self._spark

    def path(self, name: str) -> str:
        """A path inside the cluster's temporary directory (for tables, checkpoints)."""
        if self.tmp is None:
            raise RuntimeError("LocalCluster is not started")
        return str(self.tmp / name)

    def start(self) -> LocalCluster:
        from kafka_pyspark import register

        # the brokers say when their ZooKeeper session ends at shutdown: expected here
        quiet = logging.getLogger("kafka_pyspark.testing")
        self._stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)
        try:
            self._stack.enter_context(self.kafka)
            self._spark, new = local_spark(self.app_name, warehouse=self.path(WAREHOUSE))
            if new:
                self._stack.callback(self._spark.stop)
            register(self._spark)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop Spark (if started here), the brokers and ZooKeeper; remove the directory."""
        self._stack.close()
        self._spark = None


def _main() -> int:  # pragma: no cover - a manual check
    with LocalCluster() as local:
        print(local.zk_connect, local.spark.version)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
