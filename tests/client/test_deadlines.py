"""A whole answer within the timeout (however slowly its bytes trickle), and errors that name
broker and request. Real loopback sockets; the servers are scripted here."""

from __future__ import annotations

import socket
import struct

import pytest
from _client_servers import ScriptedServer, read_request

from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.errors import BrokerConnectionError, BrokerTimeoutError, ProtocolError

ANNOUNCED = 60  # FETCH answer body: error 0 + 58 bytes


def trickle(sock: socket.socket, srv: ScriptedServer) -> None:
    """Answers each request with a 60-byte FETCH body, one byte every 50 ms (3 s in all)."""
    while not srv.stopping.is_set():
        req = read_request(sock)
        if req is None:
            return
        srv.record(req)
        sock.sendall(struct.pack(">i", ANNOUNCED))
        for _ in range(ANNOUNCED):
            if srv.stopping.wait(0.05):
                return
            sock.sendall(b"\x00")


def test_a_trickled_answer_fails_within_the_timeout_naming_broker_and_request() -> None:
    with ScriptedServer(trickle) as srv:
        conn = BrokerConnection(srv.host, srv.port, timeout=0.5, retries=1, backoff=0.01,
                                broker_id=7)
        with conn, pytest.raises(BrokerTimeoutError) as e:
            conn.fetch("slow", 3, 120, 1000)
        text = str(e.value)
        assert f"broker 7 at {srv.host}:{srv.port}" in text
        assert "FETCH topic 'slow' partition 3 offset 120" in text
        assert "no whole answer to FETCH" in text and "within 0.5 s" in text
        assert f"of {ANNOUNCED} bytes of the response body received" in text
        assert "gave up after 2 attempts" in text
        assert srv.accepted == 2  # retried once, bounded


def test_a_trickled_barrier_answer_fails_within_the_timeout() -> None:
    def handler(sock: socket.socket, srv: ScriptedServer) -> None:
        assert read_request(sock) is not None  # the PRODUCE
        assert read_request(sock) is not None  # the barrier's OFFSETS
        sock.sendall(struct.pack(">ihi", 14, 0, 1))
        for _ in range(8):  # the offset, one byte every 0.3 s
            if srv.stopping.wait(0.3):
                return
            sock.sendall(b"\x00")

    with (
        ScriptedServer(handler) as srv,
        BrokerConnection(srv.host, srv.port, timeout=0.5, retries=0) as conn,
    ):
        conn.produce("t", 0, b"")
        with pytest.raises(BrokerConnectionError,
                           match=r"no whole answer to OFFSETS .* within 0\.5 s"):
            conn.barrier("t", 0)


@pytest.mark.parametrize("length", [-100, -(2**31)])
def test_a_negative_length_names_broker_request_topic_and_partition(length: int) -> None:
    def handler(sock: socket.socket, srv: ScriptedServer) -> None:
        if read_request(sock) is not None:
            sock.sendall(struct.pack(">i", length))
            read_request(sock)

    with ScriptedServer(handler) as srv:
        conn = BrokerConnection(srv.host, srv.port, timeout=2.0, retries=2, broker_id=4)
        with conn, pytest.raises(ProtocolError) as e:
            conn.fetch("neg", 1, 17, 1000)
        text = str(e.value)
        assert f"broker 4 at {srv.host}:{srv.port}" in text
        assert "FETCH topic 'neg' partition 1 offset 17 max size 1000" in text
        assert f"negative frame length {length}" in text
        assert not conn.connected and srv.accepted == 1  # never retried: the stream is lost
