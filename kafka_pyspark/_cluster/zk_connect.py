"""Starting the kazoo client of a :class:`~kafka_pyspark._cluster.zk_session.ZkSession`
within the connection timeout, and the small helpers it shares with the session."""

from __future__ import annotations

import contextlib
import socket
import time
import warnings
from typing import Any

from kafka_pyspark._cluster.zk_auth import KAZOO_LOG
from kafka_pyspark.errors import RegistryUnavailableError

__all__ = ["ConnectDeadline", "QuickAckSocket", "describe", "start_client", "stop_quietly"]

_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only


def start_client(
    zk_connect: str, *, session_timeout_ms: int, connection_timeout_ms: int,
    auth_data: list[tuple[str, str]],
) -> Any:
    """A started kazoo client of ``zk_connect``: connected (TCP connect and handshake) within
    ``connection_timeout_ms`` however long the session timeout (:class:`ConnectDeadline`),
    else :class:`RegistryUnavailableError`; reconnecting quickly after a lost connection
    (each call is bounded by its caller)."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import SequentialThreadingHandler
    from kazoo.retry import KazooRetry

    handler = ConnectDeadline(SequentialThreadingHandler())
    client = KazooClient(
        hosts=zk_connect,
        timeout=session_timeout_ms / 1000.0,
        # Reconnect quickly after a ZooKeeper restart; each call is bounded separately.
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
        handler=handler,
        auth_data=auth_data or None,
        logger=KAZOO_LOG,
    )
    timeout = connection_timeout_ms / 1000.0
    handler.deadline = time.monotonic() + timeout
    try:
        with warnings.catch_warnings():
            # kazoo warns when the chroot does not exist; the registry reports missing nodes
            warnings.simplefilter("ignore")
            client.start(timeout=timeout)
    except Exception as e:
        stop_quietly(client)
        raise RegistryUnavailableError(
            f"ZooKeeper {zk_connect}: could not connect within "
            f"{connection_timeout_ms} ms (zk.connectiontimeout.ms): {describe(e)}"
        ) from e
    finally:
        handler.deadline = None  # connected (or stopped): kazoo's own timing from now on
    return client


class ConnectDeadline:
    """kazoo's threading handler, every socket wait of the first connect ending by
    ``deadline`` (monotonic) while it is set.

    kazoo gives each connect attempt's TCP connect and handshake read the *session* timeout,
    and ``start(timeout)``, once it gives up, stops the client by joining kazoo's thread, which
    is still in that wait: a ZooKeeper that accepts the connection and never answers (or one
    whose SYNs are lost) would hold the connect for the session timeout. kazoo makes all its
    socket waits through its handler, so bounding them here bounds the whole connect by the
    connection timeout without changing the session timeout ZooKeeper is asked for. Unset
    once connected: pings and reconnects keep kazoo's own timing."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler
        self.deadline: float | None = None

    def __getattr__(self, name: str) -> Any:  # the rest of kazoo's handler interface
        return getattr(self._handler, name)

    def _bounded(self, timeout: float | None) -> float | None:
        deadline = self.deadline
        if deadline is None:
            return timeout
        left = max(deadline - time.monotonic(), 0.001)  # 0 would mean "do not wait at all"
        return left if timeout is None else min(timeout, left)

    def select(self, rlist: Any, wlist: Any, xlist: Any, timeout: float | None = None) -> Any:
        return self._handler.select(rlist, wlist, xlist, self._bounded(timeout))

    def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = self._bounded(kwargs.get("timeout"))
        sock = self._handler.create_connection(*args, **kwargs)
        return sock if _QUICKACK is None else QuickAckSocket(sock)


class QuickAckSocket:
    """A kazoo connection's socket that acknowledges what it receives at once.

    The ZooKeeper server writes each response as it is ready, with Nagle's algorithm on: when
    one round holds two or more requests (a pipeline), the second response waits for the
    client's ACK of the first, which Linux delays (docs/writing.md, "Exactly once", has the
    cost). Linux leaves quick-ACK mode on its own, so it is asked for again around every read."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock

    def __getattr__(self, name: str) -> Any:  # the rest of the socket interface
        return getattr(self._sock, name)

    def _quickack(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)

    def recv(self, size: int) -> bytes:
        self._quickack()  # the ACK of what arrived while kazoo waited in select
        try:
            data: bytes = self._sock.recv(size)
        finally:
            self._quickack()  # and of what arrives next
        return data


def describe(e: BaseException | None) -> str:
    if e is None:
        return "unknown error"
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def stop_quietly(client: Any) -> None:
    with contextlib.suppress(Exception):  # best-effort shutdown of a kazoo session
        client.stop()
        client.close()
