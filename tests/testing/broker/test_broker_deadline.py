"""The embedded broker's request deadline: a request that has started must
arrive whole within ``socket_timeout`` seconds, however its bytes trickle; other clients are
served meanwhile; an idle connection stays open (0.7.2)."""

from __future__ import annotations

import select
import socket
import struct
from pathlib import Path

from _broker_raw import THREE, TIMEOUT, Conn, wait_until

from kafka_pyspark.testing.broker import EmbeddedBroker

TRICKLES = 40  # one byte every 0.25 s: 10 s if the broker never closes the connection


def test_a_trickled_request_is_closed_at_the_deadline_others_are_served(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path, socket_timeout=1.0) as b:
        with Conn(b) as c:
            c.produce("t", 0, THREE)
            c.barrier("t")
        idle = socket.create_connection((b.host, b.port), timeout=TIMEOUT)
        slow = socket.create_connection((b.host, b.port), timeout=TIMEOUT)
        slow.sendall(struct.pack(">i", 100))  # announces a 100-byte request
        sent, closed, served = 0, False, 0
        for _ in range(TRICKLES):
            with Conn(b) as other:  # another client, served while the slow one trickles
                assert other.offsets("t", 0, -1, 1) == [51]
                served += 1
            if select.select([slow], [], [], 0.25)[0]:
                closed = slow.recv(1) == b""
                break
            try:
                slow.send(b"\x00")
            except OSError:
                closed = True
                break
            sent += 1
        assert closed, "the broker kept a trickled request open past its deadline"
        assert sent < TRICKLES and served >= 1
        slow.close()
        # its thread is gone: only the idle connection (between requests) remains
        assert wait_until(lambda: len(b._conns) == 1)
        idle.sendall(wire_offsets())
        assert len(idle.recv(100)) == 4 + 2 + 4 + 8  # the idle connection still works
        idle.close()


def wire_offsets() -> bytes:
    from kafka_pyspark import _wire as wire

    return wire.encode_request(wire.OffsetsRequest("t", 0, -1, 1))
