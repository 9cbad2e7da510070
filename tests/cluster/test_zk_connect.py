"""Starting a ZooKeeper session is bounded by ``zk.connectiontimeout.ms`` as a whole (TCP
connect and handshake), whatever ``zk.sessiontimeout.ms`` is, against real silent peers on
loopback, directly and through a Spark read."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import silent_peer

from kafka_pyspark._cluster.zk_connect import QuickAckSocket
from kafka_pyspark._cluster.zk_session import Created, ZkSession
from kafka_pyspark.errors import RegistryUnavailableError

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


@contextlib.contextmanager
def first_connection_only(target: str) -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback port (yielded, with the connections held) that forwards its first connection
    to ``target`` (host:port) and accepts every later one without answering: a ZooKeeper
    session that gets through, and a four-letter word to the same server left unanswered."""
    host, port = target.rsplit(":", 1)
    held: list[socket.socket] = []
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)

        def pump(src: socket.socket, dst: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while data := src.recv(65536):
                    dst.sendall(data)
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

        def accept() -> None:
            with contextlib.suppress(OSError):
                client, _ = srv.accept()
                upstream = socket.create_connection((host, int(port)), timeout=10)
                upstream.settimeout(None)
                held.extend([client, upstream])
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=pump, args=(a, b), daemon=True).start()
                while True:
                    held.append(srv.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
        try:
            yield srv.getsockname()[1], held
        finally:
            for s in held:
                s.close()


@pytest.mark.zk
def test_an_unanswered_srvr_is_bounded_by_the_connection_timeout_and_asked_once(
    zookeeper: Any,
) -> None:
    """Whether the server has ``multi`` is asked with ``srvr`` on a connection of its own: a
    server that accepts it and never answers holds it for the connection timeout, not the
    session timeout, once: the session then writes one node per request, and every write
    after that goes without asking again."""
    target, chroot = zookeeper.new_chroot("t").split("/", 1)
    with first_connection_only(target) as (port, held):
        session = ZkSession(f"127.0.0.1:{port}/{chroot}", session_timeout_ms=SESSION_MS,
                            connection_timeout_ms=CONNECTION_MS)
        try:
            assert session.children("/") == []  # the session gets through
            started = time.monotonic()
            assert session.has_multi() is False
            elapsed = time.monotonic() - started
            assert elapsed < SESSION_MS / 1000 / 2
            assert session.create([("/srvr-a", b"1", None), ("/srvr-b", b"2", None)], "/") == [
                Created.CREATED, Created.CREATED]
            assert session.set_values([("/srvr-a", b"3"), ("/srvr-b", b"4")], "/") == [True, True]
            assert session.values(["/srvr-a", "/srvr-b"], "/") == [b"3", b"4"]
            assert len(held) == 3  # the session's two sockets and one srvr connection
        finally:
            session.close()


@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_a_read_leaves_the_socket_acknowledging_at_once() -> None:
    """The wrapper asks for quick ACKs around a read: a socket put in delayed-ACK mode
    (TCP_QUICKACK 0) is back in quick-ACK mode after it, and the bytes are the peer's."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        peer, _ = srv.accept()
        with client, peer:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 0)
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 0
            wrapped = QuickAckSocket(client)
            peer.sendall(b"answer")
            assert wrapped.recv(6) == b"answer"
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK) == 1
            assert wrapped.fileno() == client.fileno()  # the rest is the socket's own


@pytest.mark.zk
@pytest.mark.skipif(not hasattr(socket, "TCP_QUICKACK"), reason="TCP_QUICKACK is Linux's")
def test_the_sessions_kazoo_connection_reads_through_the_wrapper(zk_connect: str) -> None:
    session = ZkSession(zk_connect, session_timeout_ms=10_000, connection_timeout_ms=5_000)
    try:
        assert session.children("/") is not None
        assert isinstance(session._zk()._connection._socket, QuickAckSocket)
    finally:
        session.close()
