"""Test infrastructure for kafka_pyspark and its users' own tests.

::

    from kafka_pyspark.testing import EmbeddedBroker, ZooKeeperServer

    with ZooKeeperServer() as zk, EmbeddedBroker(zk_connect=zk.connect_string) as broker:
        ...

- :class:`EmbeddedBroker` (``kafka_pyspark.testing.broker``): a real single-node Kafka 0.7.2
  broker (sockets, segment files, ZooKeeper registry); ``python -m
  kafka_pyspark.testing.broker`` runs one from the command line. See ``docs/broker.md``.
- :class:`ZooKeeperServer` (``kafka_pyspark.testing._zookeeper``): a throwaway standalone
  ZooKeeper (Debian's ``zookeeper`` package).

Imports are lazy so that ``python -m kafka_pyspark.testing.broker`` does not import the
module twice and importing one does not pull in the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_pyspark.testing._log import LogStorageError
    from kafka_pyspark.testing._zookeeper import ZooKeeperServer, ZooKeeperServerError
    from kafka_pyspark.testing.broker import EmbeddedBroker, EmbeddedBrokerError

_WHERE = {
    "EmbeddedBroker": "kafka_pyspark.testing.broker",
    "EmbeddedBrokerError": "kafka_pyspark.testing.broker",
    "LogStorageError": "kafka_pyspark.testing._log",
    "ZooKeeperServer": "kafka_pyspark.testing._zookeeper",
    "ZooKeeperServerError": "kafka_pyspark.testing._zookeeper",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'kafka_pyspark.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "EmbeddedBroker",
    "EmbeddedBrokerError",
    "LogStorageError",
    "ZooKeeperServer",
    "ZooKeeperServerError",
]
