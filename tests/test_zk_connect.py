"""Starting a ZooKeeper session is bounded by ``zk.connectiontimeout.ms`` as a whole (TCP
connect and handshake), whatever ``zk.sessiontimeout.ms`` is, against real silent peers on
loopback, directly and through a Spark read."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from _cluster import silent_peer

from kafka_pyspark.errors import RegistryUnavailableError
from kafka_pyspark.zk_session import ZkSession

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The session timeout is 60 times the connection timeout: a connect that waits for the
# former instead of the latter cannot finish under half of it, however loaded the machine.
SESSION_MS, CONNECTION_MS = 60_000, 1_000


@contextlib.contextmanager
def lost_syn_peer() -> Iterator[int]:
    """A loopback port whose accept queue is full: the kernel drops further SYNs, so a
    connect to it neither completes nor is refused."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(0)
        port: int = srv.getsockname()[1]
        fillers = [socket.socket() for _ in range(4)]
        try:
            for f in fillers:
                f.setblocking(False)
                f.connect_ex(("127.0.0.1", port))
            yield port
        finally:
            for f in fillers:
                f.close()


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


@pytest.mark.parametrize("peer", [silent_peer, lost_syn_peer], ids=["silent", "lost-syn"])
def test_the_connect_is_bounded_by_the_connection_timeout_not_the_session_timeout(
    peer: Callable[[], contextlib.AbstractContextManager[int]],
) -> None:
    before = _threads()
    with peer() as port:
        session = ZkSession(f"127.0.0.1:{port}", session_timeout_ms=SESSION_MS,
                            connection_timeout_ms=CONNECTION_MS)
        started = time.monotonic()
        with pytest.raises(RegistryUnavailableError) as info:
            session.children("/")
        elapsed = time.monotonic() - started
        session.close()
    assert str(info.value) == (
        f"ZooKeeper 127.0.0.1:{port}: could not connect within {CONNECTION_MS} ms "
        "(zk.connectiontimeout.ms): KazooTimeoutError: Connection time-out"
    )
    assert elapsed < SESSION_MS / 1000 / 2
    assert _threads() <= before  # kazoo's connection and worker threads have ended



@pytest.mark.spark
def test_a_spark_read_of_a_silent_zookeeper_fails_within_the_connection_timeout(
    spark: SparkSession,
) -> None:
    """The Spark options reach the same bound: a session timeout of 10 minutes does not hold
    the read (its planning connects to ZooKeeper) that long."""
    session_ms = 600_000
    with silent_peer() as port:
        df = (
            spark.read.format("kafka07")
            .option("zk.connect", f"127.0.0.1:{port}")
            .option("zk.sessiontimeout.ms", str(session_ms))
            .option("zk.connectiontimeout.ms", str(CONNECTION_MS))
            .option("subscribe", "t")
            .load()
        )
        started = time.monotonic()
        with pytest.raises(Exception, match="RegistryUnavailableError") as info:
            df.count()
        elapsed = time.monotonic() - started
    assert (
        f"ZooKeeper 127.0.0.1:{port}: could not connect within {CONNECTION_MS} ms "
        "(zk.connectiontimeout.ms)"
    ) in str(info.value)
    assert elapsed < session_ms / 1000 / 2
