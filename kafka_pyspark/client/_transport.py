"""One TCP socket to a broker: connecting, the idle check, sending, framed answers by a deadline.

Framing of answers: every 0.7 response is ``int32 LENGTH | LENGTH bytes``. The body is read with
``recv_into`` into ONE ``bytearray`` (no per-chunk concatenation: a FETCH answer can be 100 MB),
and handed out as a ``memoryview``; the wire decoders slice it without copying. The length is
bounded by what the request allows; anything larger is a :class:`ProtocolError` (the caller
drops the connection: the stream can no longer be trusted).

Receive buffer: an answer of up to ``2 * buffer_size`` bytes (the executor sizes the socket
buffers to the fetch size) is read into one ``bytearray`` kept by the transport, when nothing
refers to the previous answer in it any more (its reference count says so, and it can change
size: a bytearray cannot while a view of it is alive, however the interpreter counts references);
else, and for larger answers, into a fresh one. Allocating and zeroing a fresh megabyte
per FETCH would be a large share of an uncompressed read. Memory stays bounded by that
buffer plus the answers the caller still holds.

Deadlines: ``timeout`` bounds the connect and every single send; a whole answer (length and
body) must arrive within ``timeout`` seconds of asking for it, however the bytes trickle.

This module knows nothing of retries or of produced data; :mod:`.connection` does.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import time

from kafka_pyspark import _wire as wire
from kafka_pyspark.errors import (
    BrokerConnectionError,
    BrokerTimeoutError,
    ProtocolError,
    with_context,
)

#: pieces per sendmsg() call (the kernel takes at most IOV_MAX, 1024 on Linux)
_GATHER_MAX = 512
_GATHER = hasattr(socket.socket, "sendmsg")  # not on Windows: joined there
_LENGTH_PART = "response length"
_BODY_PART = "response body"
# sys.getrefcount of the kept receive buffer when only the transport holds it (its attribute,
# the local name, the call's argument): no view of a previous answer is alive. Python 3.14 may
# not count the argument (a borrowed reference): then one view goes unseen, _unviewed sees it.
_UNSHARED_REFS = 3
_AHEAD_CHUNK = 64 << 10  # one receive of answers to pipelined requests


def _unviewed(buf: bytearray) -> bool:
    """Whether no buffer view of ``buf`` (memoryview, numpy array, Arrow buffer) is alive: a
    bytearray refuses to change size while one is. Its contents and allocation are left as they
    were (pop, then append into the byte it freed; growing first would over-allocate)."""
    if not buf:
        return True  # nothing in it to overwrite
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True


class SendFailed(Exception):
    """A send failed after ``sent`` bytes; ``error`` is what to raise."""

    def __init__(self, sent: int, error: BrokerConnectionError) -> None:
        super().__init__(str(error))
        self.sent = sent
        self.error = error


class Transport:
    """The socket of one :class:`~kafka_pyspark.client.BrokerConnection` (not thread-safe:
    the connection's lock serialises its use). ``address`` names the peer in every error."""

    def __init__(self, host: str, port: int, address: str, *, timeout: float,
                 buffer_size: int) -> None:
        self.host = host
        self.port = port
        self.address = address
        self.timeout = timeout
        self.buffer_size = buffer_size
        self.sock: socket.socket | None = None
        self.connects = 0  # sockets opened so far (a change means a new broker session)
        self.keep_bytes = 2 * buffer_size  # the largest receive buffer kept for reuse
        self._kept: bytearray | None = None
        self._head = bytearray(4)
        self._ahead = bytearray()  # read ahead by read_small_frame, from _ahead_pos on
        self._ahead_pos = 0

    def close(self) -> None:
        self._ahead.clear()
        self._ahead_pos = 0
        sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def open(self) -> socket.socket:
        """The socket, connecting if there is none."""
        if self.sock is None:
            self.sock = self._connect()
            self.connects += 1
        return self.sock

    def _connect(self) -> socket.socket:
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise BrokerConnectionError(f"cannot resolve {self.address}: {e}") from e
        last: OSError | None = None
        for family, stype, proto, _, addr in infos:
            sock = socket.socket(family, stype, proto)
            try:
                # Buffers before connect(), so the TCP window scale is negotiated for them.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.buffer_size)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.buffer_size)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(self.timeout)
                sock.connect(addr)
            except OSError as e:
                sock.close()
                last = e
                continue
            return sock
        if isinstance(last, TimeoutError):
            raise BrokerTimeoutError(
                f"cannot connect to {self.address}: no answer within {self.timeout:g} s"
            ) from last
        raise BrokerConnectionError(f"cannot connect to {self.address}: {last}") from last

    def idle_ok(self) -> bool:
        """False if there is no socket, or the idle socket is at EOF, in error, or holds
        unexpected bytes (e.g. the broker restarted and closed it)."""
        sock = self.sock
        if sock is None:
            return False
        try:
            if hasattr(select, "poll"):  # no FD_SETSIZE limit, unlike select()
                poller = select.poll()
                poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
                readable = bool(poller.poll(0))
            else:  # pragma: no cover - platforms without poll()
                readable = bool(select.select([sock], [], [], 0)[0])
            if not readable:
                return True
            # Readable while idle: EOF, an error, or stray bytes. None of them is usable.
            sock.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return False
        return False

    def send(self, frame: bytes | list[bytes | memoryview], what: str) -> int:
        """Send a whole frame (or its pieces in order, gathered by the kernel: not copied
        here) on the open socket; on failure raise :class:`SendFailed` carrying the bytes
        sent."""
        sock = self.open()
        if isinstance(frame, bytes) or not _GATHER:
            frame = [frame if isinstance(frame, bytes) else b"".join(frame)]
        # bytes as they are (len is their size); other buffers as bytes, whatever their format
        parts = [p if isinstance(p, bytes) else memoryview(p).cast("B") for p in frame]
        total = sum(map(len, parts))
        sent = i = 0  # parts[i] is the first not sent whole
        try:
            while i < len(parts):
                n = (sock.send(parts[i]) if i == len(parts) - 1
                     else sock.sendmsg(parts[i:i + _GATHER_MAX]))
                sent += n
                i = _advance(parts, i, n) if sent < total else len(parts)
        except TimeoutError as e:
            raise SendFailed(
                sent,
                BrokerTimeoutError(
                    f"{self.address}: sending {what} timed out after {self.timeout:g} s "
                    f"({sent} of {total} bytes sent)"
                ),
            ) from e
        except OSError as e:
            raise SendFailed(
                sent,
                BrokerConnectionError(
                    f"{self.address}: connection lost sending {what} "
                    f"({sent} of {total} bytes sent): {e}"
                ),
            ) from e
        return sent

    def read_frame(self, bound: int, what: str, close_hint: str) -> memoryview:
        """One answer: ``int32 LENGTH | LENGTH bytes``, all of it within ``timeout`` seconds
        of this call (a broker trickling bytes cannot hold the caller longer)."""
        sock = self.open()
        deadline = time.monotonic() + self.timeout
        head = memoryview(self._head)
        self._recv_exact(sock, head, what, _LENGTH_PART, close_hint, deadline)
        try:
            n = wire.frame_length(head)
        except ProtocolError as e:  # negative: name where, as for a too large one
            raise with_context(e, f"{self.address}: the answer to {what}") from e
        if n > bound:
            raise ProtocolError(
                f"{self.address}: the answer to {what} announces {n} bytes, more than the "
                f"{bound} this request allows"
            )
        view = self._room(n)
        self._recv_exact(sock, view, what, _BODY_PART, close_hint, deadline)
        return view

    def _room(self, n: int) -> memoryview:
        """``n`` bytes to receive an answer into: the kept buffer if it is large enough and
        no view of it is alive, else a fresh one (kept if at most ``keep_bytes``)."""
        kept = self._kept
        if (kept is not None and len(kept) >= n and sys.getrefcount(kept) <= _UNSHARED_REFS
                and _unviewed(kept)):
            return memoryview(kept)[:n]
        fresh = bytearray(n)
        if n <= self.keep_bytes:
            self._kept = fresh
        return memoryview(fresh)

    def _recv_exact(self, sock: socket.socket, view: memoryview, what: str, part: str,
                    close_hint: str, deadline: float) -> None:
        """Fill ``view``; by ``deadline`` (monotonic) at the latest, however the bytes trickle."""
        n = len(view)
        got = 0
        try:
            while got < n:
                k = sock.recv_into(view[got:], n - got) if self._until(sock, deadline) else 0
                if k == 0:
                    raise self._closed_error(what, part, close_hint, got, n)
                got += k
        except OSError as e:
            raise self._read_error(e, what, part, close_hint, got, n) from e
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(self.timeout)

    def _until(self, sock: socket.socket, deadline: float) -> bool:
        """Set the socket's timeout to what is left until ``deadline`` (the whole answer's
        deadline, not per receive); TimeoutError once it has passed. True."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        if left < self.timeout:
            sock.settimeout(left)
        return True

    def _read_error(self, e: OSError, what: str, part: str, close_hint: str, got: int,
                    n: int) -> BrokerConnectionError:
        """What a failed receive of ``part`` (``got`` of ``n`` bytes) raises."""
        if isinstance(e, TimeoutError) and not isinstance(e, BrokerConnectionError):
            return BrokerTimeoutError(
                f"{self.address}: no whole answer to {what} within {self.timeout:g} s "
                f"({got} of {n} bytes of the {part} received)"
            )
        cause: OSError = e
        if isinstance(e, ConnectionResetError) and part == _LENGTH_PART and got == 0:
            # a broker that closes the connection with requests of ours unread resets it
            # (pipelined requests): the same as closing it instead of answering
            cause = self._closed_error(what, part, close_hint, got, n)
        return BrokerConnectionError(
            f"{self.address}: connection lost reading the {part} of the answer to "
            f"{what} ({got} of {n} bytes received): {cause}"
        )

    # --- many small answers in a row (pipelined requests) -----------------------------------

    @property
    def ahead(self) -> int:
        """Bytes received past the last answer :meth:`read_small_frame` returned."""
        return len(self._ahead) - self._ahead_pos

    def read_small_frame(self, bound: int, what: str, close_hint: str) -> bytes:
        """:meth:`read_frame` (same deadline and errors) for answers to pipelined requests:
        the socket is read in chunks into a read-ahead buffer, so one receive brings many
        answers; the answer is a copy (they are small). Bytes read ahead belong to the
        answers that follow: while there are any (:attr:`ahead`), only this method may read
        the socket; :meth:`close` drops them."""
        sock = self.open()
        deadline = time.monotonic() + self.timeout
        self._fill(sock, 4, what, _LENGTH_PART, close_hint, deadline)
        pos = self._ahead_pos
        try:
            n = wire.frame_length(memoryview(self._ahead)[pos : pos + 4])
        except ProtocolError as e:
            raise with_context(e, f"{self.address}: the answer to {what}") from e
        if n > bound:
            raise ProtocolError(
                f"{self.address}: the answer to {what} announces {n} bytes, more than the "
                f"{bound} this request allows"
            )
        self._fill(sock, 4 + n, what, _BODY_PART, close_hint, deadline)
        body = bytes(memoryview(self._ahead)[pos + 4 : pos + 4 + n])
        self._ahead_pos = pos + 4 + n
        if self._ahead_pos == len(self._ahead):
            self._ahead.clear()
            self._ahead_pos = 0
        elif self._ahead_pos >= _AHEAD_CHUNK:
            del self._ahead[: self._ahead_pos]
            self._ahead_pos = 0
        return body

    def _fill(self, sock: socket.socket, need: int, what: str, part: str, close_hint: str,
              deadline: float) -> None:
        """Receive until the read-ahead buffer holds ``need`` bytes past its position (a
        frame's length field, 4, or its whole, 4 + body), by ``deadline``."""
        if self.ahead >= need:
            return
        header = 0 if part == _LENGTH_PART else 4
        try:
            while self.ahead < need:
                chunk = sock.recv(_AHEAD_CHUNK) if self._until(sock, deadline) else b""
                if not chunk:
                    raise self._closed_error(what, part, close_hint, self.ahead - header,
                                             need - header)
                self._ahead += chunk
        except OSError as e:
            raise self._read_error(e, what, part, close_hint, self.ahead - header,
                                   need - header) from e
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(self.timeout)

    def _closed_error(self, what: str, part: str, close_hint: str, got: int,
                      n: int) -> BrokerConnectionError:
        if part == _LENGTH_PART and got == 0:
            return BrokerConnectionError(
                f"{self.address} closed the connection instead of answering {what}{close_hint}"
            )
        return BrokerConnectionError(
            f"{self.address} closed the connection in the middle of the answer to "
            f"{what} ({got} of {n} bytes of the {part} received)"
        )


def _advance(parts: list[bytes | memoryview], i: int, n: int) -> int:
    """After ``n`` more bytes were sent from ``parts[i]`` on: the index of the first part not
    sent whole, that part cut to what is left of it (a view, not a copy). The list is not
    sliced: a request of thousands of small sets takes many calls."""
    while i < len(parts) and n >= len(parts[i]):
        n -= len(parts[i])
        i += 1
    if n:
        parts[i] = memoryview(parts[i])[n:]
    return i
