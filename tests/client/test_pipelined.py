"""OFFSETS pipelined on one connection (``BrokerConnection.offsets_pipelined``) and the lookups
built on it: the same answers and the same failures as one request at a time, against the
embedded 0.7.2 broker (which, like 0.7.2, closes the connection on OFFSETS for a partition it
does not have) and scripted servers on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from _bytes import message
from _client_servers import FakeBroker, Handler, ScriptedServer, read_request

from kafka_pyspark import _wire as wire
from kafka_pyspark._cluster import BrokerAddress, cluster_options
from kafka_pyspark._spark.read.log_bounds import LogBounds, OffsetLookup
from kafka_pyspark.client import BrokerConnection, Producer
from kafka_pyspark.client._connection import OFFSETS_WINDOW
from kafka_pyspark.errors import BrokerConnectionError, ProtocolError, UnknownError
from kafka_pyspark.testing.broker import EmbeddedBroker

TOPIC = "t"
LATEST, EARLIEST = wire.OFFSETS_LATEST, wire.OFFSETS_EARLIEST
M = len(message(b"m0-0"))  # every message's size


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker with 3 partitions of ``TOPIC`` holding 1, 2 and 3 messages, each in segments
    of one message."""
    with EmbeddedBroker(0, log_dir=tmp_path / "b", num_partitions=3, log_file_size=1) as b:
        with Producer({0: (b.host, b.port)}, timeout=10.0) as p:
            for part in range(3):
                for i in range(part + 1):
                    p.send(0, TOPIC, part, message(f"m{part}-{i}".encode()))
                    p.flush()
        yield b


def connect(b: EmbeddedBroker, buffer_size: int = 65536) -> BrokerConnection:
    return BrokerConnection(b.host, b.port, broker_id=0, timeout=5.0, retries=2, backoff=0.0,
                            buffer_size=buffer_size)


def req(partition: int, time: int = LATEST, max_number: int = 100) -> wire.OffsetsRequest:
    return wire.OffsetsRequest(TOPIC, partition, time, max_number)


def one_at_a_time(c: BrokerConnection, requests: list[wire.OffsetsRequest]) -> list[list[int]]:
    return [c.offsets(r.topic, r.partition, r.time, r.max_number) for r in requests]


def test_answers_equal_one_request_at_a_time(broker: EmbeddedBroker) -> None:
    kinds = [(LATEST, 100), (LATEST, 1), (EARLIEST, 1), (0, 1), (2**40, 10)]
    requests = [req(i % 3, *kinds[i % len(kinds)]) for i in range(3 * OFFSETS_WINDOW + 7)]
    with connect(broker) as c, connect(broker) as ref:
        expected = one_at_a_time(ref, requests)
        assert expected[:3] == [[M, 0], [2 * M], [0]]  # sanity: segments of one message
        assert c.offsets_pipelined(requests) == expected
        assert c.connects == 1
    # a small socket buffer: fewer requests in flight, the same answers
    with connect(broker, buffer_size=64) as c:
        assert c.offsets_pipelined(requests) == expected
        assert c.offsets_pipelined([]) == []
        assert c.offsets(TOPIC, 0, LATEST, 100) == expected[0]  # the connection is reusable
        assert c.connects == 1


def test_broker_closing_mid_window_fails_as_one_request_at_a_time(
    broker: EmbeddedBroker,
) -> None:
    """Partition 5 does not exist: the broker closes the connection on it, with the requests
    after it in flight. The answers before it are kept; the failure, its message and the
    retries (connections opened) are those of asking one request at a time."""
    requests = [req(0), req(1), req(5), *[req(i % 3) for i in range(OFFSETS_WINDOW)]]
    with connect(broker) as ref:
        good = one_at_a_time(ref, requests[:2])
        with pytest.raises(BrokerConnectionError) as one:
            one_at_a_time(ref, requests[2:3])
        ref_connects = ref.connects
    with connect(broker) as c:
        answers: list[list[int]] = []
        with pytest.raises(BrokerConnectionError) as piped:
            c.offsets_pipelined(requests, answers)
        assert answers == good
        assert str(piped.value) == str(one.value)
        assert "partition 5 of topic 't' does not exist on it" in str(piped.value)
        assert "gave up after 3 attempts" in str(piped.value)
        assert c.connects == ref_connects == 3
        assert not c.connected
        assert c.offsets_pipelined(requests[:2]) == good  # reconnects on next use


def test_a_reset_mid_window_fails_as_one_request_at_a_time() -> None:
    """As above, against a server that, like 0.7.2 (which reads one request at a time), leaves
    the requests after the bad one unread: its close is then a reset, not an end of stream."""
    requests = [req(0), req(1), req(2), *[req(0)] * OFFSETS_WINDOW]
    with ScriptedServer(FakeBroker(partitions=2)) as srv:
        with BrokerConnection(srv.host, srv.port, timeout=5.0, retries=1, backoff=0.0) as ref:
            good = one_at_a_time(ref, requests[:2])
            with pytest.raises(BrokerConnectionError) as one:
                one_at_a_time(ref, requests[2:3])
        with BrokerConnection(srv.host, srv.port, timeout=5.0, retries=1, backoff=0.0) as c:
            answers: list[list[int]] = []
            with pytest.raises(BrokerConnectionError) as piped:
                c.offsets_pipelined(requests, answers)
            assert answers == good
            assert str(piped.value) == str(one.value)
            assert "partition 2 of topic 't' does not exist on it" in str(piped.value)
            assert c.connects == 2


def test_lookup_keeps_what_a_closing_broker_answered(broker: EmbeddedBroker) -> None:
    """The stream's lookup: the broker-partitions before the failing one answered, the broker
    reported down with the one-at-a-time error; the batch lookup raises that error."""
    options = cluster_options(broker_list=f"0:{broker.host}:{broker.port}")
    brokers = {0: BrokerAddress(0, broker.host, broker.port)}
    tps = [(TOPIC, 0, 0), (TOPIC, 0, 1), (TOPIC, 0, 7), (TOPIC, 0, 2)]
    with OffsetLookup(brokers, options) as lookup:
        found, down = lookup.bounds_per_broker(tps)
        assert found == {(TOPIC, 0, 0): LogBounds(0, M, (0,)),
                         (TOPIC, 0, 1): LogBounds(0, 2 * M, (0, M))}
        assert list(down) == [0] and "partition 7 of topic 't' does not exist" in str(down[0])
        with pytest.raises(BrokerConnectionError) as ei:
            lookup.all_bounds(tps)
        assert str(ei.value) == str(down[0])
        assert lookup.all_bounds(tps[:2] + tps[3:]) == {
            **found, (TOPIC, 0, 2): LogBounds(0, 3 * M, (0, M, 2 * M))}
        assert lookup.before_times(tps[:2], 0) == {(TOPIC, 0, 0): None, (TOPIC, 0, 1): None}


def _answer_then(code_at: int, then: bytes = b"") -> Handler:
    """A server answering OFFSETS in order: ``[7]``, except error 1 at request ``code_at``,
    and ``then`` right after the answer to the first request."""
    def handler(sock: socket.socket, srv: ScriptedServer) -> None:
        i = 0
        while read_request(sock) is not None:
            code = -1 if i == code_at else 0
            answer = wire.encode_offsets_response(code, [] if code else [7])
            sock.sendall(answer + then if i == 0 else answer)  # one send: read at once
            i += 1

    return handler


def test_an_error_code_mid_window_raises_typed_and_drops_the_connection() -> None:
    requests = [req(0)] * 10
    with ScriptedServer(_answer_then(3)) as srv, BrokerConnection(
        srv.host, srv.port, timeout=5.0, retries=0
    ) as c:
        answers: list[list[int]] = []
        with pytest.raises(UnknownError, match="OFFSETS topic 't' partition 0"):
            c.offsets_pipelined(requests, answers)
        assert answers == [[7]] * 3
        assert not c.connected  # answers to later requests were in flight
        assert c.offsets_pipelined(requests[:2]) == [[7], [7]]
        assert srv.accepted == 2


def test_bytes_no_request_asked_for_are_a_protocol_error() -> None:
    stray = wire.encode_offsets_response(0, [9])
    with ScriptedServer(_answer_then(-1, stray)) as srv, BrokerConnection(
        srv.host, srv.port, timeout=5.0, retries=2
    ) as c:
        with pytest.raises(ProtocolError, match="no request asked for"):
            c.offsets_pipelined([req(0)])
        assert not c.connected and srv.accepted == 1  # never retried
