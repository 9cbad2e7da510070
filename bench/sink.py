"""The write benches' broker, a *sink*: a separate process that reads PRODUCE requests,
splices their message sets into /dev/null without copying them, answers OFFSETS with the bytes
received per partition (as a broker's log end) and probing FETCHes. What the benches measure is
the writer's, not a broker's. On a cluster the broker runs on other machines; here it shares the
2 cores, so it is made as cheap as it can be, and its CPU is reported. The embedded test broker
validates every CRC in Python and would be the bottleneck.

Also :func:`trip_source`, the Spark writer to this sink that only encodes and sends."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Iterator, Mapping
from multiprocessing import get_context
from typing import Any

from bench.spark_sources import settled_arrow_sink

#: partitions of every topic, as the sink answers a probing FETCH
SINK_PARTITIONS = 2

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    out = sock.recv(n, socket.MSG_WAITALL)
    return out if len(out) == n else None


class _Drain:
    """Discards socket bytes without copying them to user space: spliced into a pipe and from
    there into /dev/null (Linux; elsewhere read into a scratch buffer)."""

    def __init__(self) -> None:
        self.scratch = memoryview(bytearray(1 << 20))
        self.pipe: tuple[int, int] | None = None
        if hasattr(os, "splice"):
            r, w = os.pipe()
            with contextlib.suppress(OSError):
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
            self.pipe = (r, w)
            self.null = os.open(os.devnull, os.O_WRONLY)

    def discard(self, sock: socket.socket, n: int) -> bool:
        if self.pipe is None:
            while n:
                k = sock.recv_into(self.scratch, min(n, len(self.scratch)))
                if not k:
                    return False
                n -= k
            return True
        r, w = self.pipe
        while n:
            k = os.splice(sock.fileno(), w, n)
            if not k:
                return False
            n -= k
            while k:
                k -= os.splice(r, self.null, k)
        return True

    def close(self) -> None:
        if self.pipe is not None:
            for fd in (*self.pipe, self.null):
                os.close(fd)


_ENDS: dict[tuple[bytes, int], int] = {}  # (topic, partition) -> log end (bytes received)
_ENDS_LOCK = threading.Lock()


def _discard_items(sock: socket.socket, count: int, drain: _Drain) -> bool:
    """Read ``count`` PRODUCE items (topic, partition, message set), discarding the sets but
    counting their bytes into the partition's log end (OFFSETS answers it, as a broker does)."""
    for _ in range(count):
        head = _recv_exact(sock, 2)
        if head is None:
            return False
        (tlen,) = _INT16.unpack(head)
        rest = _recv_exact(sock, tlen + 8)
        if rest is None:
            return False
        partition, size = struct.unpack_from(">ii", rest, tlen)
        if not drain.discard(sock, size):
            return False
        with _ENDS_LOCK:
            key = (rest[:tlen], partition)
            _ENDS[key] = _ENDS.get(key, 0) + size
    return True


def _serve(sock: socket.socket) -> None:
    # Message sets are spliced to /dev/null: the sink takes as little of the machine's CPU
    # from the writer it measures as it can (a broker would run on another machine).
    drain = _Drain()
    with sock:
        try:
            _answer(sock, drain)
        finally:
            drain.close()


def _answer(sock: socket.socket, drain: _Drain) -> None:
    while True:
        head = _recv_exact(sock, 6)  # int32 length, int16 request type
        if head is None:
            return
        length, rtype = struct.unpack(">ih", head)
        if rtype == 0:  # PRODUCE: no answer
            if not _discard_items(sock, 1, drain):
                return
            continue
        if rtype == 3:  # MULTIPRODUCE: no answer
            count = _recv_exact(sock, 2)
            if count is None or not _discard_items(sock, _INT16.unpack(count)[0], drain):
                return
            continue
        body = _recv_exact(sock, length - 2)
        if body is None:
            return
        (tlen,) = _INT16.unpack_from(body, 0)
        (partition,) = _INT32.unpack_from(body, 2 + tlen)
        if rtype == 4:  # OFFSETS: the log end (bytes received for that partition)
            with _ENDS_LOCK:
                end = _ENDS.get((body[2 : 2 + tlen], partition), 0)
            sock.sendall(struct.pack(">ihiq", 2 + 4 + 8, 0, 1, end))
        elif rtype == 1:  # FETCH max size 0: probing partitions
            error = 0 if 0 <= partition < SINK_PARTITIONS else 3
            sock.sendall(struct.pack(">ih", 2, error))
        else:
            return


def _sink_main(port_pipe: Any) -> None:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port_pipe.send(listener.getsockname()[1])
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


class Sink:
    """The sink broker in its own process (so it does not share the benchmark's GIL)."""

    def __enter__(self) -> Sink:
        ctx = get_context("spawn")
        parent, child = ctx.Pipe()
        self.process = ctx.Process(target=_sink_main, args=(child,), daemon=True)
        self.process.start()
        if not parent.poll(30):
            raise RuntimeError("the sink broker did not start")
        self.port = int(parent.recv())
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(10)

    @property
    def broker_list(self) -> str:
        return f"0:127.0.0.1:{self.port}"


def trip_source() -> Any:
    """A data source ``bench_trip`` whose writer only encodes and sends: per Arrow batch one
    encoder call (sets of ``batch.size`` consecutive rows), each set handed to a ``Producer``
    for this sink (options ``port``, ``topic``, ``codec``, ``batch.size``), the partitions in
    turn, the delivery barrier at the end. No routing, buffering, size checks or records: what
    a writer that moves these bytes to a broker on the same cores cannot avoid."""
    def encode_and_send(o: Mapping[str, str], batches: Iterator[Any]) -> None:
        from kafka_pyspark._messages import encode_message_sets_arrow
        from kafka_pyspark._shared import defaults
        from kafka_pyspark._write.sizes import request_limit
        from kafka_pyspark.client import Producer

        topic, codec, size = o["topic"], o["codec"], int(o["batch.size"])
        with Producer({0: ("127.0.0.1", int(o["port"]))},
                      buffer_size=defaults.WRITE_SOCKET_BUFFER_SIZE,
                      max_request_size=request_limit(defaults.MAX_MESSAGE_SIZE)) as prod:
            partition = 0
            for batch in batches:
                n = batch.num_rows
                cuts = [*range(0, n, size), n]
                sets = encode_message_sets_arrow(batch.column(0), cuts, compression=codec)
                for data in sets:
                    prod.send(0, topic, partition, data)
                    partition = (partition + 1) % SINK_PARTITIONS
            prod.flush()

    return settled_arrow_sink("bench_trip", encode_and_send)
