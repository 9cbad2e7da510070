"""The transport's scatter-gather send: a request's pieces go to the socket in order, not
joined first; partial sends resume inside a piece; the bytes on the wire are the joined frame."""

from __future__ import annotations

import socket
import threading

import numpy as np

from kafka_pyspark import _wire as wire
from kafka_pyspark.client._transport import _GATHER_MAX, Transport, _advance


def _views(parts: list[bytes]) -> list[memoryview]:
    return [memoryview(p) for p in parts]


def _left(parts: list[bytes | memoryview], i: int, n: int) -> list[bytes]:
    """What is left to send after ``n`` more bytes from ``parts[i]`` on (``parts`` copied)."""
    parts = list(parts)
    return [bytes(p) for p in parts[_advance(parts, i, n):]]


def test_advance_drops_whole_pieces_and_cuts_into_the_next() -> None:
    parts: list[bytes | memoryview] = [*_views([b"abc", b"de", b"fghij"])]
    assert _left(parts, 0, 0) == [b"abc", b"de", b"fghij"]
    assert _left(parts, 0, 3) == [b"de", b"fghij"]
    assert _left(parts, 0, 4) == [b"e", b"fghij"]
    assert _left(parts, 0, 5) == [b"fghij"]
    assert _left(parts, 0, 7) == [b"hij"]
    assert _left(parts, 0, 10) == []
    assert _left(parts, 1, 3) == [b"ghij"]  # from a later part on
    # bytes pieces (request headers) too; a cut one becomes a view, not a copy
    mixed: list[bytes | memoryview] = [b"abc", memoryview(b"de"), b"fghij"]
    assert _left(mixed, 0, 4) == [b"e", b"fghij"]
    i = _advance(mixed, 0, 6)
    assert i == 2 and isinstance(mixed[2], memoryview) and bytes(mixed[2]) == b"ghij"


def _received(server: socket.socket, size: int, into: list[bytes]) -> None:
    conn, _ = server.accept()
    with conn:
        got = bytearray()
        while len(got) < size:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            got += chunk
        into.append(bytes(got))


def test_a_gathered_frame_arrives_as_the_joined_frame() -> None:
    """More pieces than one sendmsg call takes, a numpy-backed set among them, and a send
    buffer far smaller than the frame (so sends are partial)."""
    rng = np.random.default_rng(7)
    sets = [rng.integers(0, 256, int(n), dtype=np.uint8).data
            for n in rng.integers(1, 3000, _GATHER_MAX + 100)]
    req = wire.MultiProduceRequest(
        tuple(wire.ProduceRequest("t", i % 4, s) for i, s in enumerate(sets)))
    parts = wire.encode_request_parts(req)
    frame = wire.encode_request(req)
    assert b"".join(bytes(p) for p in parts) == frame
    assert len(parts) > _GATHER_MAX
    with socket.create_server(("127.0.0.1", 0)) as server:
        got: list[bytes] = []
        reader = threading.Thread(target=_received, args=(server, len(frame), got))
        reader.start()
        t = Transport("127.0.0.1", server.getsockname()[1], "test", timeout=10.0,
                      buffer_size=4096)
        try:
            assert t.send(parts, "a gathered request") == len(frame)
        finally:
            t.close()
        reader.join(10)
    assert got == [frame]
