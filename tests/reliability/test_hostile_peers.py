"""Hostile peers on both sides of the wire, no Spark needed.

- The embedded broker fed malformed and slow requests keeps serving everyone else, and never
  writes outside its log directory whatever topic name a raw PRODUCE carries.
- The client facing a broker that accepts and never answers, or one that trickles its answer a
  byte at a time, ends with a clear error naming the broker instead of hanging.

Requests are built by hand from the 0.7 layout (docs/dev/PROTOCOL.md "Request header"):
``int32 size | int16 type | int16 topic length | topic | int32 partition | ...``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rel_support import Recorder, produce, values

from kafka_pyspark._messages import decode_message_set, encode_message_set
from kafka_pyspark.client import BrokerConnection
from kafka_pyspark.errors import BrokerConnectionError
from kafka_pyspark.testing.broker import EmbeddedBroker

PRODUCE, FETCH = 0, 1


def _produce_request(topic: bytes, partition: int, message_set: bytes) -> bytes:
    body = (struct.pack(">hh", PRODUCE, len(topic)) + topic
            + struct.pack(">ii", partition, len(message_set)) + message_set)
    return struct.pack(">i", len(body)) + body


def _fetch_request(topic: bytes, partition: int, offset: int, max_size: int) -> bytes:
    body = (struct.pack(">hh", FETCH, len(topic)) + topic
            + struct.pack(">iqi", partition, offset, max_size))
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def lone_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(broker_id=0, log_dir=tmp_path / "logs" / "b0", num_partitions=1,
                        socket_timeout=2.0) as b:
        yield b


def _round_trip(broker: EmbeddedBroker, topic: str, tag: str) -> list[bytes]:
    """A well-behaved client: produce 3 values, read them back."""
    sent = produce(broker, topic, {0: values(tag, 3)})
    with BrokerConnection(broker.host, broker.port, timeout=5.0) as c:
        start = 0
        got: list[bytes] = []
        while True:
            answer = c.fetch(topic, 0, start, 1 << 16)
            batch = decode_message_set(answer.messages, start)
            if batch.bytes_consumed == 0:
                break
            got += [bytes(v) for v in batch.batch.column("value").to_pylist()]
            start = batch.next_offset
    return [v for v in got if v.startswith(tag.encode())][-len(sent):] if got else []


MALFORMED = [
    ("negative size", struct.pack(">i", -100)),
    ("zero size", struct.pack(">i", 0)),
    ("size 2^31-1", struct.pack(">i", 2**31 - 1) + b"\x00" * 16),
    ("unknown type", struct.pack(">ih", 6, 99) + b"\x00" * 4),
    ("truncated body", struct.pack(">ihh", 40, PRODUCE, 30) + b"abc"),
    ("topic length past body", struct.pack(">ihh", 4, PRODUCE, 500)),
    ("negative message set length",
     struct.pack(">ihh", 14, PRODUCE, 1) + b"t" + struct.pack(">ii", 0, -5)),
    ("garbage", b"\xff" * 64),
]


def test_malformed_and_slow_requests_do_not_stop_the_broker(
    lone_broker: EmbeddedBroker, record: Recorder
) -> None:
    """Each malformed request gets its connection closed; 20 connections that send half a
    request and stall hold nothing up (a normal client is served meanwhile) and are closed by
    the broker's request deadline."""
    stalled = []
    try:
        for _ in range(20):  # slowloris: 2 bytes of a length, then nothing
            s = socket.create_connection((lone_broker.host, lone_broker.port), timeout=5.0)
            s.sendall(b"\x00\x00")
            stalled.append(s)
        closed = 0
        for _name, raw in MALFORMED:
            with socket.create_connection((lone_broker.host, lone_broker.port),
                                          timeout=10.0) as s:
                s.sendall(raw)
                try:
                    closed += s.recv(1) == b""  # the broker closes; it never answers junk
                except ConnectionResetError:
                    closed += 1
        got = _round_trip(lone_broker, "ok", "served")
        # the broker's request deadline (socket_timeout, 2 s here) ends every stalled request
        dropped = 0
        for s in stalled:
            s.settimeout(15.0)  # a hang guard, not a measurement
            try:
                dropped += s.recv(1) == b""
            except ConnectionResetError:
                dropped += 1
            except TimeoutError:
                pass
    finally:
        for s in stalled:
            s.close()
    record("broker fed 8 malformed + 20 stalled requests; a normal client served",
           expected=values("served", 3), got=got,
           detail=f"{closed}/{len(MALFORMED)} malformed and {dropped}/{len(stalled)} stalled "
           "connections closed")
    assert closed == len(MALFORMED)
    assert dropped == len(stalled)
    assert got == values("served", 3)


HOSTILE_TOPICS = [b"..", b".", b"../escape", b"a/../../escape", b"/tmp/abs-escape",
                  b"sub/dir", b"nul\x00byte", b"back\\slash", b"", b"x" * 300]


def test_topic_names_never_escape_the_log_directory(
    lone_broker: EmbeddedBroker, tmp_path: Path, record: Recorder
) -> None:
    """Raw PRODUCEs with topic names made to escape the log directory: nothing is created
    outside it, and the broker still serves a legal topic."""
    before = {p for p in Path("/tmp").iterdir() if "escape" in p.name}
    message_set = encode_message_set([b"payload"])
    for topic in HOSTILE_TOPICS:
        with socket.create_connection((lone_broker.host, lone_broker.port), timeout=5.0) as s:
            s.sendall(_produce_request(topic, 0, message_set))
            s.sendall(_fetch_request(topic, 0, 0, 1024))
            s.settimeout(5.0)
            try:
                while s.recv(65536):
                    pass  # an error answer, or the connection closed
            except (TimeoutError, ConnectionResetError):
                pass
    got = _round_trip(lone_broker, "legal", "after")
    log_root = lone_broker.log_dir
    outside = sorted(
        str(p) for p in tmp_path.rglob("*") if log_root not in p.parents and p != log_root
        and p.is_file() and not p.name.endswith(".out")
    )
    inside = sorted(p.name for p in log_root.iterdir())
    after = {p for p in Path("/tmp").iterdir() if "escape" in p.name}
    record(f"broker fed {len(HOSTILE_TOPICS)} escaping topic names", expected=values("after", 3),
           got=got, detail=f"log dir holds {inside}")
    assert outside == [] and after == before
    assert all("/" not in n and ".." not in n for n in inside)
    assert set(inside) <= {"legal-0", ".kafka_cleanshutdown"}, inside
    assert got == values("after", 3)


# --- the client against brokers that do not answer properly -------------------------------------


class _SilentServer:
    """Accepts connections; ``trickle`` None reads forever and never answers; else answers
    every connection with a 4-byte length of 1000 and then one byte every ``trickle`` s."""

    def __init__(self, trickle: float | None) -> None:
        self.trickle = trickle
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(0.2)
            if self.trickle is not None:
                conn.sendall(struct.pack(">i", 1000))
            while not self.stop.is_set():
                if self.trickle is not None:
                    conn.sendall(b"\x00")
                    self.stop.wait(self.trickle)
                else:
                    with contextlib.suppress(TimeoutError):
                        conn.recv(65536)
        except OSError:
            pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize(
    "trickle", [pytest.param(None, id="never-answers"),
                pytest.param(0.2, id="trickles")]
)
def test_client_fails_clearly_on_a_broker_that_does_not_answer(
    trickle: float | None, record: Recorder
) -> None:
    """A FETCH to a broker that never answers (or trickles): a BrokerConnectionError naming
    host:port, not a hang. The guard below only detects a hang (20 x the 0.5 s timeout); it
    does not measure the deadline."""
    server = _SilentServer(trickle)
    result: dict[str, BaseException] = {}

    def call() -> None:
        try:
            with BrokerConnection("127.0.0.1", server.port, timeout=0.5, retries=1,
                                  broker_id=7) as c:
                c.fetch("t", 0, 0, 1 << 20)
        except BaseException as e:
            result["error"] = e

    worker = threading.Thread(target=call, daemon=True)
    try:
        worker.start()
        worker.join(10.0)
        hung = worker.is_alive()
    finally:
        server.close()
        worker.join(10.0)
    error = result.get("error")
    name = type(error).__name__ if error is not None else "none"
    record(f"client vs a broker that {'trickles' if trickle else 'never answers'}",
           expected=0, got=0, detail="hung" if hung else f"error {name}")
    assert not hung, "the client hung on a broker that does not answer"
    assert isinstance(error, BrokerConnectionError), error
    assert f"127.0.0.1:{server.port}" in str(error)

