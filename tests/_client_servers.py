"""Test helpers for the client tests: scripted TCP servers and a tiny in-memory 0.7 broker.

Everything listens on 127.0.0.1:0 in daemon threads inside a context manager; every socket
has a timeout. The fake broker follows docs/dev/PROTOCOL.md "A real 0.7.2 broker, measured" (FETCH
never crosses a segment, serves only "visible" bytes, error 1/3, OFFSETS closes the connection for a
bad partition) so the client's loops can be tested byte for byte without the embedded broker.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

from kafka_pyspark import _wire as wire

IO_TIMEOUT = 5.0


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_request(sock: socket.socket) -> wire.Request | None:
    """Read one request frame; None on EOF/error/timeout."""
    head = recv_exact(sock, 4)
    if head is None:
        return None
    body = recv_exact(sock, wire.frame_length(head))
    if body is None:
        return None
    return wire.decode_request(body)


Handler = Callable[[socket.socket, "ScriptedServer"], None]


class ScriptedServer:
    """Accepts connections; runs ``handler(sock, server)`` for each in a daemon thread."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.host, self.port = self.listener.getsockname()[:2]
        self.accepted = 0
        self.requests: list[wire.Request] = []
        self.received_bytes = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ScriptedServer:
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self._threads:
            t.join(timeout=IO_TIMEOUT)
        self.listener.close()

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(IO_TIMEOUT)
            with self.lock:
                self.accepted += 1
                self._socks.append(sock)
            t = threading.Thread(target=self._run, args=(sock,), daemon=True)
            t.start()
            self._threads.append(t)

    def _run(self, sock: socket.socket) -> None:
        try:
            self.handler(sock, self)
        except OSError:
            pass
        finally:
            sock.close()

    def record(self, req: wire.Request) -> None:
        with self.lock:
            self.requests.append(req)


def wait_until_stopped(server: ScriptedServer) -> None:
    server.stopping.wait(IO_TIMEOUT)


# --- canned handlers -------------------------------------------------------------------------


def silent(sock: socket.socket, server: ScriptedServer) -> None:
    """Reads whatever comes and never answers, until the server stops."""
    sock.settimeout(0.05)
    while not server.stopping.is_set():
        try:
            if not sock.recv(65536):
                return
        except TimeoutError:
            continue


def close_after_request(sock: socket.socket, server: ScriptedServer) -> None:
    """Reads one request and closes without answering (0.7.2 on OFFSETS for a bad partition)."""
    req = read_request(sock)
    if req is not None:
        server.record(req)


def rst_close(sock: socket.socket) -> None:
    """Close with a RST (SO_LINGER 0)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# --- a tiny in-memory 0.7 broker ---------------------------------------------------------------


class FakeLog:
    """Segments of one partition; ``visible`` bounds what FETCH serves (the flushed end)."""

    def __init__(self, segments: list[bytes] | None = None) -> None:
        self.segments: list[bytes] = list(segments or [b""])
        self.visible: int | None = None

    @property
    def end(self) -> int:
        return sum(len(s) for s in self.segments)

    def starts(self) -> list[int]:
        out, pos = [], 0
        for s in self.segments:
            out.append(pos)
            pos += len(s)
        return out

    def read(self, offset: int, max_size: int) -> tuple[int, bytes]:
        end = self.end
        if offset < 0 or offset > end:
            return 1, b""
        limit = end if self.visible is None else min(self.visible, end)
        for start, seg in zip(self.starts(), self.segments, strict=True):
            # The segment holding the offset; a segment's end belongs to the next one.
            if start <= offset < start + len(seg):
                stop = min(start + len(seg), limit, offset + max_size)
                return 0, seg[offset - start : max(stop - start, offset - start)]
        return 0, b""


class FakeBroker:
    """Handler object for ``ScriptedServer(FakeBroker(...))``; ``partitions`` per topic."""

    def __init__(self, partitions: int = 2) -> None:
        self.partitions = partitions
        self.logs: dict[tuple[str, int], FakeLog] = {}
        self.fetch_sizes: list[int] = []
        self.lock = threading.Lock()

    def log(self, topic: str, partition: int) -> FakeLog:
        with self.lock:
            return self.logs.setdefault((topic, partition), FakeLog())

    def _fetch(self, f: wire.FetchRequest) -> tuple[int, bytes]:
        self.fetch_sizes.append(f.max_size)
        if not 0 <= f.partition < self.partitions:
            return 3, b""
        return self.log(f.topic, f.partition).read(f.offset, f.max_size)

    def __call__(self, sock: socket.socket, server: ScriptedServer) -> None:
        while not server.stopping.is_set():
            req = read_request(sock)
            if req is None:
                return
            server.record(req)
            if isinstance(req, wire.FetchRequest):
                err, data = self._fetch(req)
                sock.sendall(wire.encode_fetch_response(err, data))
            elif isinstance(req, wire.MultiFetchRequest):
                parts = [self._fetch(f) for f in req.fetches]
                sock.sendall(wire.encode_multifetch_response(parts))
            elif isinstance(req, wire.OffsetsRequest):
                if not 0 <= req.partition < self.partitions:
                    return  # 0.7.2 closes the connection
                lg = self.log(req.topic, req.partition)
                if req.time == wire.OFFSETS_EARLIEST:
                    offs = [0]
                else:
                    offs = [lg.end, *reversed(lg.starts())][: req.max_number]
                sock.sendall(wire.encode_offsets_response(0, offs))
            elif isinstance(req, wire.ProduceRequest):
                self._append(req)
            elif isinstance(req, wire.MultiProduceRequest):
                for p in req.produces:
                    self._append(p)

    def _append(self, p: wire.ProduceRequest) -> None:
        if not 0 <= p.partition < self.partitions:
            return
        lg = self.log(p.topic, p.partition)
        lg.segments[-1] += p.messages
