"""The registry's session and how it reads node values: what
:class:`~kafka_pyspark._cluster.registry.Registry` and its
:class:`~kafka_pyspark._cluster.groups.ConsumerGroups` share, each holding the same
:class:`RegistryNodes` (the module docstring of :mod:`kafka_pyspark._cluster.registry` describes
the nodes, the time bounds and the access control).

Every problem with a node is a :class:`RegistryError` naming the node and the ZooKeeper
address.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import NoReturn

from kafka_pyspark._cluster.options import ClusterOptions, zk_chroot
from kafka_pyspark._cluster.zk_session import ZkSession
from kafka_pyspark._shared.partition_key import is_decimal
from kafka_pyspark.errors import OptionError, RegistryError

__all__ = ["BROKER_IDS", "BROKER_TOPICS", "CONSUMERS", "RegistryNodes", "decimal_problem"]

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONSUMERS = "/consumers"


class RegistryNodes:
    """The ZooKeeper session of a registry (``options.zk_connect``), and reading node values.
    Thread-safe; all calls time-bounded."""

    def __init__(self, options: ClusterOptions) -> None:
        if options.zk_connect is None:
            raise OptionError("zk.connect", "is required by the ZooKeeper registry")
        self.zk_connect = options.zk_connect
        self.chroot: str | None = zk_chroot(options.zk_connect)
        self.session_timeout_ms = options.zk_session_timeout_ms
        self.connection_timeout_ms = options.zk_connection_timeout_ms
        self.options = options
        self.zk = ZkSession(
            self.zk_connect,
            session_timeout_ms=self.session_timeout_ms,
            connection_timeout_ms=self.connection_timeout_ms,
            # (scheme, credential) pairs for kazoo; never logged, never in a message or repr
            auth_data=[options.zk_auth] if options.zk_auth is not None else [],
        )

    def close(self) -> None:
        """End the ZooKeeper session. Idempotent."""
        self.zk.close()

    @property
    def connected(self) -> bool:
        """True while the session is connected (False before first use and while kazoo is
        reconnecting): a call made now is likely to be answered promptly."""
        return self.zk.connected

    def children(self, paths: Sequence[str]) -> list[list[str] | None]:
        """The children of each of ``paths`` (None: no such node), in one pipelined round."""
        return self.zk.children_of(paths, paths[0] if len(paths) == 1 else "/*")

    # --- reading nodes -------------------------------------------------------------------------

    def values(self, paths: list[str]) -> list[bytes | None]:
        """Values of ``paths`` fetched in one pipelined round (None for vanished nodes)."""
        if not paths:
            return []
        return self.zk.values(paths, paths[0].rsplit("/", 1)[0] + "/*")

    def values_of(self, groups: Sequence[Sequence[str]]) -> list[list[bytes | None]]:
        """:meth:`values` of each group of paths, all of them read in one pipelined round."""
        values = iter(self.values([p for group in groups for p in group]))
        return [list(islice(values, len(group))) for group in groups]

    def bad(self, path: str, problem: str) -> RegistryError:
        return RegistryError(f"ZooKeeper {self.zk_connect}: node {path}: {problem}")

    def decimal(self, path: str, raw: bytes, what: str) -> int:
        problem = decimal_problem(raw, what)
        if problem is not None:
            self.fail(path, problem)
        return int(raw)

    def fail(self, path: str, problem: str) -> NoReturn:
        raise self.bad(path, problem)


def decimal_problem(raw: bytes, what: str) -> str | None:
    """Why ``raw`` is not a node value in 0.7's decimal format (None if it is)."""
    if is_decimal(raw.decode("ascii", "replace")):
        return None
    return f"{what} must be a non-negative decimal integer, got {raw!r}"
