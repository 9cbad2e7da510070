"""Many brokers at once: one connection per broker, one long-lived thread per broker.

:class:`BrokerConnections` is the one per-broker connection cache (the driver's OFFSETS
lookups, the producer, ``broker.list`` probes, the ``kafka07`` tables): a broker's connection
is opened at its first use and kept until :meth:`~BrokerConnections.close`.
:class:`BrokerPool` is the one fan-out that asks every broker at the same time: each broker's
work runs on that broker's own thread (started at its first call, kept until ``close()``), so a
connection is only ever used by its broker's thread, and a driver that asks every micro-batch
starts no thread after the first one. :meth:`BrokerPool.each` gives every broker's result or
error (a broker may be given a deadline: the ``kafka07`` tables), :meth:`BrokerPool.run` the
results or the first error (the Spark read path).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark.client._connection import OFFSETS_WINDOW, BrokerConnection
from kafka_pyspark.errors import BrokerTimeoutError

__all__ = [
    "WORKER_PREFIX", "BrokerConnections", "BrokerPool", "ConnectionSettings", "answer_deadline_ms",
]

#: the name of a broker's worker thread is this and the broker id (then ``_0``)
WORKER_PREFIX = "kafka07-broker-"

_W = TypeVar("_W")
_R = TypeVar("_R")


@dataclass(frozen=True)
class ConnectionSettings:
    """How :class:`BrokerConnections` opens a connection (:class:`BrokerConnection`'s
    arguments: seconds, bytes, attempts)."""

    timeout: float = defaults.SOCKET_TIMEOUT_MS / 1000
    buffer_size: int = defaults.SOCKET_BUFFER_SIZE
    retries: int = 3
    backoff: float = 0.2


def open_connection(broker: int, host: str, port: int,
                    settings: ConnectionSettings) -> BrokerConnection:
    """The connection :class:`BrokerConnections` opens to a broker (it connects lazily)."""
    return BrokerConnection(host, port, timeout=settings.timeout,
                            buffer_size=settings.buffer_size, retries=settings.retries,
                            backoff=settings.backoff, broker_id=broker)


class BrokerConnections(Closing):
    """One connection per broker of ``brokers`` (``{id: (host, port)}``), opened at first use
    and kept; thread-safe. Context manager: :meth:`close` closes them all."""

    def __init__(self, brokers: Mapping[int, tuple[str, int]],
                 settings: ConnectionSettings = ConnectionSettings()) -> None:
        self.settings = settings
        self._brokers = dict(brokers)
        self._conns: dict[int, BrokerConnection] = {}
        self._lock = threading.Lock()

    def __contains__(self, broker: object) -> bool:
        return broker in self._brokers

    def known(self) -> list[int]:
        """The broker ids, sorted."""
        return sorted(self._brokers)

    def get(self, broker: int) -> BrokerConnection:
        """The broker's connection, opened if it has none (``KeyError`` for an unknown id:
        callers say what an unknown broker means to them)."""
        with self._lock:
            conn = self._conns.get(broker)
            if conn is None:
                host, port = self._brokers[broker]
                conn = self._conns[broker] = open_connection(broker, host, port, self.settings)
            return conn

    def opened(self, broker: int) -> BrokerConnection | None:
        """The broker's connection if one was opened (None otherwise)."""
        with self._lock:
            return self._conns.get(broker)

    def update(self, brokers: Mapping[int, tuple[str, int]]) -> None:
        """Brokers as they are now: the connection to a broker that moved (another host and
        port) or left is closed; the others are kept."""
        brokers = dict(brokers)
        with self._lock:
            gone = [b for b in self._conns if brokers.get(b) != self._brokers.get(b)]
            closing = [self._conns.pop(b) for b in gone]
            self._brokers = brokers
        for conn in closing:
            conn.close()

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()


def answer_deadline_ms(timeout_ms: int, requests: int) -> int:
    """How long a broker's whole part of a table may take: twice the per-request timeout, and
    once more per window of pipelined requests it is asked beyond the first (the work asked
    grows it; each answer still has ``timeout_ms``)."""
    return timeout_ms * (2 + max(0, requests - 1) // OFFSETS_WINDOW)


class BrokerPool(Closing):
    """Work for many brokers at the same time, each broker's on its own long-lived thread,
    with its connection from :attr:`connections`. Context manager: :meth:`close` ends the
    threads (each ends its current work first: every request has its socket timeout) and
    closes the connections."""

    def __init__(self, connections: BrokerConnections) -> None:
        self.connections = connections
        self._threads: dict[int, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    def run(self, work: Mapping[int, _W], fn: Callable[[int, _W], _R]) -> dict[int, _R]:
        """``fn(broker, work[broker])`` for every broker at the same time (a single broker in
        the caller's thread); waits for every one, then raises the first error (in ``work``'s
        order) or returns the results."""
        if len(work) <= 1:
            return {broker: fn(broker, w) for broker, w in work.items()}
        done, failed = self.each(work, fn)
        for broker in work:
            if broker in failed:
                raise failed[broker]
        return done

    def each(
        self, work: Mapping[int, _W], fn: Callable[[int, _W], _R],
        deadlines_ms: Mapping[int, int] | None = None,
    ) -> tuple[dict[int, _R], dict[int, Exception]]:
        """``fn(broker, work[broker])`` for every broker at the same time, each on its
        broker's thread; returns the results and the errors, by broker. With
        ``deadlines_ms``, a broker whose work has not ended that long after the start gets a
        :class:`BrokerTimeoutError` (its thread ends at its request's timeout; the others are
        unaffected)."""
        began = time.monotonic()
        futures = {broker: self._thread(broker).submit(fn, broker, w)
                   for broker, w in work.items()}
        done: dict[int, _R] = {}
        failed: dict[int, Exception] = {}
        for broker, f in futures.items():
            allowed = None if deadlines_ms is None else deadlines_ms[broker]
            if not _ended(f, None if allowed is None else began + allowed / 1000.0):
                where = _where(self.connections, broker)
                failed[broker] = BrokerTimeoutError(
                    f"{where}: no complete answer within {allowed} ms")
                continue
            error = f.exception()
            if error is None:
                done[broker] = f.result()
            elif isinstance(error, Exception):
                failed[broker] = error
            else:  # pragma: no cover - a worker thread is never interrupted
                raise error
        return done, failed

    def _thread(self, broker: int) -> ThreadPoolExecutor:
        with self._lock:
            pool = self._threads.get(broker)
            if pool is None:
                pool = self._threads[broker] = ThreadPoolExecutor(
                    1, thread_name_prefix=f"{WORKER_PREFIX}{broker}")
            return pool

    def close(self) -> None:
        with self._lock:
            pools, self._threads = list(self._threads.values()), {}
        for pool in pools:
            pool.shutdown(wait=True)
        self.connections.close()


def _ended(f: Future[Any], deadline: float | None) -> bool:
    """Whether ``f`` ended by ``deadline`` (monotonic; None: waits for it)."""
    wait([f], None if deadline is None else max(0.0, deadline - time.monotonic()))
    return f.done()


def _where(connections: BrokerConnections, broker: int) -> str:
    conn = connections.opened(broker)
    return conn.address if conn is not None else f"broker {broker}"
