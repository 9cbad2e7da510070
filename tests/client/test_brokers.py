"""The one per-broker fan-out and connection cache (``client/_brokers.py``), against the
embedded 0.7.2 broker and a loopback port that never answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bytes import message
from _cluster import silent_peer

from kafka_pyspark.client import BrokerConnection, Producer
from kafka_pyspark.client._brokers import (
    WORKER_PREFIX,
    BrokerConnections,
    BrokerPool,
    ConnectionSettings,
)
from kafka_pyspark.client._offsets import segment_starts_of
from kafka_pyspark.errors import BrokerTimeoutError
from kafka_pyspark.testing.broker import EmbeddedBroker

M = len(message(b"m0"))  # every message's size


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """Broker 0 with partition 1 of ``t`` holding two messages."""
    with EmbeddedBroker(0, log_dir=tmp_path / "b", num_partitions=2) as b:
        with Producer({0: (b.host, b.port)}, timeout=10.0) as p:
            p.send(0, "t", 1, message(b"m0") + message(b"m1"))
            p.flush()
        yield b


def _bounds(conn: BrokerConnection) -> list[tuple[int, int]]:
    found, error = segment_starts_of(conn, [("t", 0), ("t", 1)])
    assert error is None
    return [(s.earliest, s.end) for s in found]


def test_each_gives_every_broker_its_answer_or_its_deadline(broker: EmbeddedBroker) -> None:
    with silent_peer() as port:
        conns = BrokerConnections({0: (broker.host, broker.port), 1: ("127.0.0.1", port)},
                                  ConnectionSettings(timeout=2.0, retries=0))
        with BrokerPool(conns) as pool:
            done, failed = pool.each({0: None, 1: None},
                                     lambda b, _: _bounds(conns.get(b)), {0: 5000, 1: 200})
            assert done == {0: [(0, 0), (0, 2 * M)]}
            assert list(failed) == [1] and isinstance(failed[1], BrokerTimeoutError)
            assert str(failed[1]) == (
                f"broker 1 at 127.0.0.1:{port}: no complete answer within 200 ms")


def test_run_reuses_each_brokers_thread_and_connection_and_raises_the_first_error(
    broker: EmbeddedBroker,
) -> None:
    conns = BrokerConnections({0: (broker.host, broker.port), 7: (broker.host, broker.port)})
    seen: list[tuple[int, str, BrokerConnection]] = []

    def work(b: int, _: None) -> list[tuple[int, int]]:
        conn = conns.get(b)
        seen.append((b, threading.current_thread().name, conn))
        return _bounds(conn)

    with BrokerPool(conns) as pool:
        for _ in range(2):
            assert pool.run({0: None, 7: None}, work) == {0: [(0, 0), (0, 2 * M)],
                                                          7: [(0, 0), (0, 2 * M)]}
        first, second = seen[:2], seen[2:]
        assert sorted((b, n, id(c)) for b, n, c in first) == \
            sorted((b, n, id(c)) for b, n, c in second)  # same threads, same connections
        assert {n.rsplit("_", 1)[0] for _, n, _ in seen} == {f"{WORKER_PREFIX}0",
                                                              f"{WORKER_PREFIX}7"}

        def fails(b: int, _: None) -> None:
            raise ValueError(f"broker {b}")

        with pytest.raises(ValueError, match="broker 7"):
            pool.run({7: None, 0: None}, fails)  # the first in the work's order
        connections = [c for _, _, c in seen[:2]]
    assert not any(c.connected for c in connections)  # closed with the pool
    workers = {n for _, n, _ in seen}
    assert not [t for t in threading.enumerate() if t.name in workers]  # ended with the pool


def test_update_closes_only_the_connections_of_brokers_that_moved_or_left(
    broker: EmbeddedBroker,
) -> None:
    here = (broker.host, broker.port)
    with BrokerConnections({0: here, 1: here, 2: here}) as conns:
        opened = {b: conns.get(b) for b in (0, 1, 2)}
        for c in opened.values():
            assert _bounds(c)[1] == (0, 2 * M)
        conns.update({0: here, 1: ("127.0.0.1", 1)})
        assert [opened[b].connected for b in (0, 1, 2)] == [True, False, False]
        assert conns.get(0) is opened[0] and conns.get(1) is not opened[1]
        assert 2 not in conns and conns.known() == [0, 1]
