"""Request framing and response sending on one broker connection (sockets, ``sendfile``)."""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import threading
import time

from kafka_pyspark.testing._log import ReadSlice
from kafka_pyspark.testing.broker._broker_errors import CloseConnection

REQUEST_LENGTH = struct.Struct(">i")  # int32 REQUEST_LENGTH (excludes itself)
_RECV_CHUNK = 1 << 20
MSG_MORE = getattr(socket, "MSG_MORE", 0)


class RequestReader:
    """Reads whole request frames from a socket, buffering pipelined requests.

    A connection may idle between requests indefinitely (as in 0.7.2), but a request that has
    started must arrive whole within ``deadline`` seconds of its first byte (of the moment the
    previous one was taken, for a pipelined request), however its bytes trickle; otherwise
    the connection is closed, so a stuck or hostile peer cannot hold a thread.
    """

    __slots__ = ("_buf", "_deadline", "_max", "_sock", "_started", "_stopping")

    def __init__(self, sock: socket.socket, max_size: int, stopping: threading.Event,
                 deadline: float) -> None:
        self._sock = sock
        self._max = max_size
        self._buf = bytearray()
        self._stopping = stopping
        self._deadline = deadline
        self._started = 0.0  # monotonic time the current request began (buffer non-empty)

    def _fill(self, need: int) -> bool:
        """Buffer at least ``need`` bytes; False at a clean end of stream between requests."""
        while len(self._buf) < need:
            between_requests = not self._buf
            left = self._deadline
            if not between_requests:
                left = self._started + self._deadline - time.monotonic()
                if left <= 0:
                    raise CloseConnection(
                        f"request not received whole within {self._deadline:g} s "
                        f"({len(self._buf)} of {need} bytes)"
                    )
                if left < self._deadline:
                    self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(min(_RECV_CHUNK, max(65536, need - len(self._buf))))
            except TimeoutError:
                if self._stopping.is_set():
                    raise
                # idle: may stay open indefinitely, as in 0.7.2; in a request: the deadline
                # check above closes the connection
                continue
            finally:
                if left < self._deadline:
                    self._sock.settimeout(self._deadline)
            if not chunk:
                if between_requests:
                    return False
                raise CloseConnection("peer closed the connection in the middle of a request")
            if between_requests:
                self._started = time.monotonic()
            self._buf += chunk
        return True

    def read(self) -> bytes | None:
        """The next request body, or None at a clean end of stream."""
        if self._buf:
            self._started = time.monotonic()  # a pipelined request: its clock starts now
        if not self._fill(4):
            return None
        (size,) = REQUEST_LENGTH.unpack_from(self._buf, 0)
        if size <= 0 or size > self._max:
            # 0.7.2 BoundedByteBufferReceive: InvalidRequestException, connection closed
            raise CloseConnection(f"request size {size} outside 1..{self._max}")
        self._fill(4 + size)
        with memoryview(self._buf) as view:
            body = bytes(view[4 : 4 + size])  # one copy (a bytearray slice would be another)
        del self._buf[: 4 + size]
        return body


# --- sending -------------------------------------------------------------------------------


def _wait_writable(sock: socket.socket) -> None:
    timeout = sock.gettimeout()
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    if not poller.poll(None if timeout is None else int(timeout * 1000)):
        raise TimeoutError("timed out sending a response")


def send_slice(sock: socket.socket, piece: ReadSlice) -> None:
    """Send ``piece`` straight from its segment file with ``os.sendfile``.

    Falls back to positional reads + ``sendall`` where ``sendfile`` is not available.
    """
    fd = piece.open()
    try:
        _send_fd(sock, fd, piece)
    finally:
        os.close(fd)


def _send_fd(sock: socket.socket, fd: int, piece: ReadSlice) -> None:
    position, remaining = piece.position, piece.length
    if hasattr(os, "sendfile"):
        out = sock.fileno()
        while remaining > 0:
            try:
                n = os.sendfile(out, fd, position, remaining)
            except BlockingIOError:
                _wait_writable(sock)
                continue
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) and (
                    position == piece.position
                ):
                    break  # not supported for this pair of descriptors: fall back
                raise
            if n == 0:
                raise CloseConnection(f"{piece.segment.path} is shorter than announced")
            position += n
            remaining -= n
    while remaining > 0:
        chunk = os.pread(fd, min(remaining, _RECV_CHUNK), position)
        if not chunk:
            raise CloseConnection(f"{piece.segment.path} is shorter than announced")
        sock.sendall(chunk)
        position += len(chunk)
        remaining -= len(chunk)


# --- message set checks --------------------------------------------------------------------
