"""Raw-socket helpers for the embedded broker tests (tests/testing/broker/).

Tests talk to the broker over plain sockets with timeouts and build message bytes by hand
(docs/dev/PROTOCOL.md layouts), so they do not depend on the client or the message codec under test.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from _bytes import message_set

from kafka_pyspark import _wire as wire

TIMEOUT = 10.0


# Three 17-byte messages (4 LENGTH + 1 MAGIC + 1 ATTRIBUTES + 4 CRC + 7 payload): offsets
# 0, 17, 34, log end 51 -- the example log of PROTOCOL.md's measured sections.
THREE = message_set(b"value-%d" % i for i in range(3))
assert len(THREE) == 51


class Conn:
    """One raw TCP connection to a broker, every operation bounded by TIMEOUT."""

    def __init__(self, broker: Any) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, req: wire.Request) -> None:
        self.send(wire.encode_request(req))

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError(f"closed after {got} of {n} bytes")
            got += k
        return bytes(buf)

    def recv_frame(self) -> bytes:
        """A whole response frame, length prefix included."""
        head = self.recv_exact(4)
        (n,) = struct.unpack(">i", head)
        return head + self.recv_exact(n)

    def closed_by_peer(self) -> bool:
        """True once the broker has closed the connection (EOF or reset) with nothing sent."""
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        return data == b""

    # requests ---------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, messages: bytes) -> None:
        self.request(wire.ProduceRequest(topic, partition, messages))

    def fetch(self, topic: str, partition: int, offset: int, max_size: int) -> bytes:
        self.request(wire.FetchRequest(topic, partition, offset, max_size))
        return self.recv_frame()

    def offsets(self, topic: str, partition: int, time_ms: int, max_number: int) -> list[int]:
        self.request(wire.OffsetsRequest(topic, partition, time_ms, max_number))
        resp = wire.decode_offsets_response(self.recv_frame()[4:])
        assert resp.error == 0
        return list(resp.offsets)

    def barrier(self, topic: str = "barrier-topic") -> None:
        """An OFFSETS round trip: every earlier request on this connection was handled."""
        self.offsets(topic, 0, -1, 1)


def fetch_frame(error: int, data: bytes = b"") -> bytes:
    """The expected FETCH response bytes, built by hand."""
    return struct.pack(">ih", 2 + len(data), error) + data


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.02) -> bool:
    """Poll ``predicate`` until true or ``timeout``: bounded waiting, never timed assertions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()

