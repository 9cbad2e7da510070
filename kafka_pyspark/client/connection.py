"""One TCP connection to a Kafka 0.7 broker: framing, timeouts, retries, the delivery barrier.

Framing: every 0.7 response is ``int32 LENGTH | LENGTH bytes``. The body is read with
``recv_into`` into ONE ``bytearray`` allocated once the length is known (no per-chunk
concatenation: a FETCH answer can be 100 MB), and handed out as a ``memoryview``; the wire
decoders slice it without copying. The length is bounded by what the request allows (a FETCH
answer is at most ``2 + max_size`` bytes); anything larger is a :class:`ProtocolError` and the
connection is dropped, since the stream can no longer be trusted.

Reads (FETCH, MULTIFETCH, OFFSETS) are idempotent: a connection error or a timeout closes the
socket, waits ``backoff * 2**attempt`` seconds, reconnects and sends again, at most ``retries``
more times. Writes (PRODUCE, MULTIPRODUCE) have no answer in 0.7; one may be retried on a new
connection only if not a single byte of it reached the socket. Once sent, it is never resent:
the broker may or may not have appended it, and only :meth:`BrokerConnection.barrier` can tell.

Delivery barrier: the broker handles one connection's requests in order (BROKER-FACTS.md), so
an OFFSETS answer proves every PRODUCE sent before it on that connection was appended (a
rejected PRODUCE closes the connection, so the answer never comes). Losing the connection while
produced data is unconfirmed is never hidden: the next :meth:`~BrokerConnection.produce` or
:meth:`~BrokerConnection.barrier` raises :class:`BrokerConnectionError` saying how much data may
not have been appended.

A connection is not meant to be shared between threads; a lock keeps a request and its answer
together if it is.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from kafka_pyspark import defaults, wire
from kafka_pyspark._closing import Closing
from kafka_pyspark.errors import (
    BrokerConnectionError,
    BrokerTimeoutError,
    ProtocolError,
    RequestTooLargeError,
    raise_for_code,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: 0.7.2's ``max.socket.request.bytes`` default: a larger request body makes the broker close
#: the connection without appending anything.
BROKER_MAX_REQUEST_BYTES = 100 * 1024 * 1024

# Responses: FETCH = int16 error + messages; OFFSETS = int16 error + int32 n + n * int64;
# MULTIFETCH = int16 error + per part (int32 length + int16 error + messages).
_FETCH_OVERHEAD = 2
_OFFSETS_OVERHEAD = 2 + 4
_MULTIFETCH_PART_OVERHEAD = 4 + 2
_MAX_OFFSETS_RESPONSE = 64 << 20


def _describe(req: wire.Request) -> str:
    """A short human description of a request for error messages."""
    if isinstance(req, wire.FetchRequest):
        return (
            f"FETCH topic {req.topic!r} partition {req.partition} offset {req.offset} "
            f"max size {req.max_size}"
        )
    if isinstance(req, wire.OffsetsRequest):
        return (
            f"OFFSETS topic {req.topic!r} partition {req.partition} time {req.time} "
            f"max number {req.max_number}"
        )
    if isinstance(req, wire.ProduceRequest):
        return f"PRODUCE topic {req.topic!r} partition {req.partition} ({len(req.messages)} bytes)"
    if isinstance(req, wire.MultiFetchRequest):
        return f"MULTIFETCH of {len(req.fetches)} fetches"
    n = sum(len(p.messages) for p in req.produces)
    return f"MULTIPRODUCE of {len(req.produces)} message sets ({n} bytes)"


class BrokerConnection(Closing):
    """One TCP connection to one broker; connects lazily; a context manager.

    ``timeout`` (seconds) bounds the connect and every single socket send/receive;
    ``buffer_size`` sets SO_RCVBUF/SO_SNDBUF (0.7's ``socket.buffersize``); reads are retried
    ``retries`` times with exponential backoff starting at ``backoff`` seconds.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = defaults.SOCKET_TIMEOUT_MS / 1000,
        buffer_size: int = defaults.SOCKET_BUFFER_SIZE,
        retries: int = 3,
        backoff: float = 0.2,
        broker_id: int | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if buffer_size <= 0:
            raise ValueError(f"buffer_size must be > 0, got {buffer_size}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if backoff < 0:
            raise ValueError(f"backoff must be >= 0, got {backoff}")
        self.host = host
        self.port = int(port)
        self.timeout = float(timeout)
        self.buffer_size = int(buffer_size)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.broker_id = broker_id
        self._sock: socket.socket | None = None
        self._lock = threading.RLock()
        self._unconfirmed_bytes = 0
        self._unconfirmed_requests = 0
        # (bytes, requests, reason) of produced data whose connection was lost unconfirmed;
        # raised by the next produce()/barrier(), then forgotten.
        self._lost: tuple[int, int, str] | None = None
        self._connects = 0  # sockets opened so far (a change means a new broker session)

    # --- introspection ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port``, with the broker id when known (for error messages)."""
        hp = f"{self.host}:{self.port}"
        return hp if self.broker_id is None else f"broker {self.broker_id} at {hp}"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def connects(self) -> int:
        """How many sockets this connection has opened (it reconnects after errors)."""
        return self._connects

    @property
    def unconfirmed_bytes(self) -> int:
        """Message-set bytes PRODUCEd on this connection since the last successful barrier."""
        return self._unconfirmed_bytes

    @property
    def unconfirmed_requests(self) -> int:
        """PRODUCE/MULTIPRODUCE requests sent on this connection since the last barrier."""
        return self._unconfirmed_requests

    def __repr__(self) -> str:
        state = "connected" if self._sock is not None else "idle"
        return f"BrokerConnection({self.address}, {state})"

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the socket. Unconfirmed produced data is forgotten (not reported)."""
        with self._lock:
            self._close_socket()
            self._unconfirmed_bytes = 0
            self._unconfirmed_requests = 0
            self._lost = None

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _drop(self, reason: str) -> None:
        """Close after an error; unconfirmed produced data becomes 'lost' (reported later)."""
        self._close_socket()
        if self._unconfirmed_requests:
            prev_b, prev_r = (self._lost[0], self._lost[1]) if self._lost else (0, 0)
            self._lost = (
                prev_b + self._unconfirmed_bytes,
                prev_r + self._unconfirmed_requests,
                reason,
            )
            self._unconfirmed_bytes = 0
            self._unconfirmed_requests = 0

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

    def _socket(self) -> socket.socket:
        """The live socket, connecting if needed. An idle socket the broker closed (e.g. it
        restarted) is noticed here, before a request is written into it."""
        sock = self._sock
        if sock is not None and not self._idle_ok(sock):
            self._drop(f"{self.address} closed the idle connection")
            sock = None
        if sock is None:
            sock = self._sock = self._connect()
            self._connects += 1
        return sock

    @staticmethod
    def _idle_ok(sock: socket.socket) -> bool:
        """False if an idle socket is at EOF, in error, or holds unexpected bytes."""
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

    # --- sending and receiving -------------------------------------------------------------

    def _send(self, sock: socket.socket, frame: bytes, what: str) -> int:
        """Send a whole frame; on failure raise ``_SendFailed`` carrying the bytes sent."""
        view = memoryview(frame)
        sent = 0
        try:
            while sent < len(view):
                sent += sock.send(view[sent:])
        except TimeoutError as e:
            raise _SendFailed(
                sent,
                BrokerTimeoutError(
                    f"{self.address}: sending {what} timed out after {self.timeout:g} s "
                    f"({sent} of {len(view)} bytes sent)"
                ),
            ) from e
        except OSError as e:
            raise _SendFailed(
                sent,
                BrokerConnectionError(
                    f"{self.address}: connection lost sending {what} "
                    f"({sent} of {len(view)} bytes sent): {e}"
                ),
            ) from e
        return sent

    def _recv_exact(self, sock: socket.socket, view: memoryview, what: str, part: str,
                    close_hint: str, deadline: float) -> None:
        """Fill ``view``; by ``deadline`` (monotonic) at the latest, however the bytes trickle."""
        n = len(view)
        got = 0
        try:
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                if left < self.timeout:
                    sock.settimeout(left)  # the whole answer's deadline, not per recv
                k = sock.recv_into(view[got:], n - got)
                if k == 0:
                    if part == "response length" and got == 0:
                        raise BrokerConnectionError(
                            f"{self.address} closed the connection instead of answering "
                            f"{what}{close_hint}"
                        )
                    raise BrokerConnectionError(
                        f"{self.address} closed the connection in the middle of the answer to "
                        f"{what} ({got} of {n} bytes of the {part} received)"
                    )
                got += k
        except TimeoutError as e:
            raise BrokerTimeoutError(
                f"{self.address}: no whole answer to {what} within {self.timeout:g} s "
                f"({got} of {n} bytes of the {part} received)"
            ) from e
        except OSError as e:
            raise BrokerConnectionError(
                f"{self.address}: connection lost reading the {part} of the answer to "
                f"{what} ({got} of {n} bytes received): {e}"
            ) from e
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(self.timeout)

    def _read_frame(self, sock: socket.socket, bound: int, what: str,
                    close_hint: str) -> memoryview:
        """One answer: ``int32 LENGTH | LENGTH bytes``, all of it within ``timeout`` seconds
        of this call (a broker trickling bytes cannot hold the caller longer)."""
        deadline = time.monotonic() + self.timeout
        head = memoryview(bytearray(4))
        self._recv_exact(sock, head, what, "response length", close_hint, deadline)
        try:
            n = wire.frame_length(head)
        except ProtocolError as e:  # negative: name where, as for a too large one
            raise ProtocolError(f"{self.address}: the answer to {what}: {e}") from e
        if n > bound:
            raise ProtocolError(
                f"{self.address}: the answer to {what} announces {n} bytes, more than the "
                f"{bound} this request allows"
            )
        body = bytearray(n)
        view = memoryview(body)
        self._recv_exact(sock, view, what, "response body", close_hint, deadline)
        return view

    # --- request patterns ------------------------------------------------------------------

    def _retry_or_raise(self, err: BrokerConnectionError, attempt: int, note: str) -> None:
        """After failed attempt ``attempt`` (0-based): back off, or raise once out of retries."""
        if attempt >= self.retries:
            if attempt == 0:
                raise err
            raise type(err)(f"{err} (gave up after {attempt + 1} attempts{note})") from err
        log.warning("%s; retrying (%d of %d)", err, attempt + 1, self.retries)
        time.sleep(self.backoff * (2**attempt))

    def _read_request(
        self,
        req: wire.Request,
        bound: int,
        decode: Callable[[memoryview], T],
        close_hint: str = "",
    ) -> T:
        """Send a request that has an answer; retry connection errors (bounded)."""
        frame = wire.encode_request(req)
        what = _describe(req)
        with self._lock:
            attempt = 0
            while True:
                try:
                    sock = self._socket()
                    self._send(sock, frame, what)
                    body = self._read_frame(sock, bound, what, close_hint)
                except _SendFailed as sf:
                    err: BrokerConnectionError = sf.error
                except BrokerConnectionError as e:
                    err = e
                except ProtocolError:
                    # The byte stream cannot be trusted any more: drop, never retry.
                    self._drop(f"protocol error on {what}")
                    raise
                except BaseException:
                    # Interrupted mid-request (e.g. task cancellation): the stream position is
                    # unknown, so the socket cannot be reused.
                    self._drop(f"interrupted during {what}")
                    raise
                else:
                    try:
                        return decode(body)
                    except ProtocolError as e:
                        self._drop(f"protocol error on {what}")
                        raise ProtocolError(f"{self.address}: {e}") from e
                self._drop(str(err))
                self._retry_or_raise(err, attempt, "")
                attempt += 1

    def _raise_if_lost(self, doing: str) -> None:
        if self._lost is None:
            return
        nbytes, nreq, reason = self._lost
        self._lost = None
        raise BrokerConnectionError(
            f"{self.address}: the connection was lost ({reason}) before a delivery barrier "
            f"confirmed the data sent on it: {nbytes} bytes in {nreq} produce requests sent "
            f"since the last barrier may not have been appended (raised by {doing})"
        )

    def _write_request(self, req: wire.ProduceRequest | wire.MultiProduceRequest,
                       nbytes: int) -> None:
        """Send a request without an answer. Retried only while not a byte of it was sent."""
        what = _describe(req)
        size = produce_request_size(req)
        if size > BROKER_MAX_REQUEST_BYTES:
            raise RequestTooLargeError(
                f"{what} is {size} bytes, over the broker's "
                f"max.socket.request.bytes ({BROKER_MAX_REQUEST_BYTES}); split it"
            )
        frame = wire.encode_request(req)
        with self._lock:
            attempt = 0
            while True:
                self._raise_if_lost(what)
                try:
                    sock = self._socket()
                    self._send(sock, frame, what)
                except _SendFailed as sf:
                    if sf.sent > 0:
                        # Partly sent: it may have been appended. Never resent; reported
                        # together with everything else unconfirmed on this connection.
                        self._unconfirmed_bytes += nbytes
                        self._unconfirmed_requests += 1
                    self._drop(str(sf.error))
                    self._raise_if_lost(what)
                    err: BrokerConnectionError = sf.error
                except BrokerConnectionError as e:  # connecting failed: nothing was sent
                    self._drop(str(e))
                    self._raise_if_lost(what)
                    err = e
                except BaseException:
                    # Interrupted: whether bytes went out is unknown; count it as unconfirmed.
                    self._unconfirmed_bytes += nbytes
                    self._unconfirmed_requests += 1
                    self._drop(f"interrupted during {what}")
                    raise
                else:
                    self._unconfirmed_bytes += nbytes
                    self._unconfirmed_requests += 1
                    return
                self._retry_or_raise(err, attempt, "; nothing was sent")
                attempt += 1

    # --- the 0.7 requests ------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, max_size: int) -> wire.FetchResponse:
        """FETCH; the error code is kept in the answer (not raised). ``messages`` is a view."""
        _check_int32("max_size", max_size)
        req = wire.FetchRequest(topic, partition, offset, max_size)
        return self._read_request(req, _FETCH_OVERHEAD + max_size, wire.decode_fetch_response)

    def multifetch(self, fetches: Sequence[wire.FetchRequest]) -> list[wire.FetchResponse]:
        """MULTIFETCH: one :class:`wire.FetchResponse` per fetch, in order (count checked)."""
        fetches = tuple(fetches)
        if not fetches:
            return []
        for f in fetches:
            _check_int32("max_size", f.max_size)
        bound = _FETCH_OVERHEAD + sum(_MULTIFETCH_PART_OVERHEAD + f.max_size for f in fetches)
        req = wire.MultiFetchRequest(fetches)

        def decode(body: memoryview) -> list[wire.FetchResponse]:
            resp = wire.decode_multifetch_response(body, len(fetches))
            if resp.error != 0:
                raise_for_code(resp.error, f"MULTIFETCH on {self.address}")
            for i, (f, part) in enumerate(zip(fetches, resp.parts, strict=True)):
                if len(part.messages) > f.max_size:
                    raise ProtocolError(
                        f"MULTIFETCH part {i} holds {len(part.messages)} bytes for a max size "
                        f"of {f.max_size}"
                    )
            return list(resp.parts)

        return self._read_request(req, bound, decode)

    def offsets(self, topic: str, partition: int, time: int, max_number: int) -> list[int]:
        """OFFSETS (``time`` -1 latest, -2 earliest, else epoch ms); offsets descending.

        A non-zero error code raises the typed :class:`BrokerError`. A 0.7.2 broker closes the
        connection instead of answering for a partition it does not have; after the bounded
        retries that surfaces as :class:`BrokerConnectionError` saying so.
        """
        _check_int32("max_number", max_number)
        req = wire.OffsetsRequest(topic, partition, time, max_number)
        bound = min(_OFFSETS_OVERHEAD + 8 * max(max_number, 0), _MAX_OFFSETS_RESPONSE)
        hint = (
            f" (a 0.7 broker does this when partition {partition} of topic {topic!r} does not "
            "exist on it)"
        )

        def decode(body: memoryview) -> list[int]:
            resp = wire.decode_offsets_response(body)
            raise_for_code(
                resp.error,
                f"OFFSETS topic {topic!r} partition {partition} time {time} on {self.address}",
            )
            return list(resp.offsets)

        return self._read_request(req, bound, decode, hint)

    def produce(self, topic: str, partition: int, message_set: bytes) -> None:
        """PRODUCE (no answer in 0.7). Never resent once a byte of it was sent."""
        self._write_request(wire.ProduceRequest(topic, partition, bytes(message_set)),
                            len(message_set))

    def multiproduce(self, items: Sequence[wire.ProduceRequest]) -> None:
        """MULTIPRODUCE (no answer in 0.7). Never resent once a byte of it was sent."""
        items = tuple(items)
        if not items:
            return
        self._write_request(wire.MultiProduceRequest(items), sum(len(p.messages) for p in items))

    def barrier(self, topic: str, partition: int) -> int | None:
        """Prove every PRODUCE sent on this connection so far was appended.

        Sends OFFSETS(latest, 1) for ``topic``/``partition`` (use one that was produced to:
        a 0.7 broker closes the connection on OFFSETS for a partition it lacks) and waits for
        the answer; any well-formed answer is proof, since the broker handles one connection's
        requests in order and closes it on a rejected PRODUCE. Never retried: if the
        connection is lost first, :class:`BrokerConnectionError` says how much data may not
        have been appended. With nothing unconfirmed, returns None at once; else the answer's
        log end of ``topic``/``partition`` (None if the answer held no offset).
        """
        req = wire.OffsetsRequest(topic, partition, wire.OFFSETS_LATEST, 1)
        what = _describe(req)
        with self._lock:
            self._raise_if_lost("the delivery barrier")
            if self._unconfirmed_requests == 0:
                return None
            nbytes, nreq = self._unconfirmed_bytes, self._unconfirmed_requests
            sock = self._sock
            try:
                if sock is None or not self._idle_ok(sock):
                    raise BrokerConnectionError(f"{self.address} closed the connection")
                self._send(sock, wire.encode_request(req), what)
                body = self._read_frame(sock, _OFFSETS_OVERHEAD + 8, what, "")
                answer = wire.decode_offsets_response(body)
            except (_SendFailed, BrokerConnectionError, ProtocolError) as e:
                cause = e.error if isinstance(e, _SendFailed) else e
                self._close_socket()
                self._unconfirmed_bytes = 0
                self._unconfirmed_requests = 0
                raise BrokerConnectionError(
                    f"delivery barrier failed: {cause}; {nbytes} bytes in {nreq} produce "
                    f"requests sent on this connection since the last barrier may not have "
                    "been appended"
                ) from cause
            except BaseException:
                self._drop(f"interrupted during the delivery barrier ({what})")
                raise
            self._unconfirmed_bytes = 0
            self._unconfirmed_requests = 0
            return answer.offsets[0] if answer.offsets and answer.error == 0 else None


def produce_request_size(req: wire.ProduceRequest | wire.MultiProduceRequest) -> int:
    """Body size (without the 4-byte length) of a PRODUCE/MULTIPRODUCE, without encoding it."""
    if isinstance(req, wire.ProduceRequest):
        # REQUEST_TYPE, TOPIC_LENGTH, TOPIC, PARTITION, MESSAGES_LENGTH, MESSAGES
        return 2 + 2 + len(req.topic) + 4 + 4 + len(req.messages)
    # REQUEST_TYPE, COUNT, then per item TOPIC_LENGTH, TOPIC, PARTITION, MESSAGES_LENGTH, MESSAGES
    return 2 + 2 + sum(2 + len(p.topic) + 4 + 4 + len(p.messages) for p in req.produces)


class _SendFailed(Exception):
    """Internal: a send failed after ``sent`` bytes; ``error`` is what to raise."""

    def __init__(self, sent: int, error: BrokerConnectionError) -> None:
        super().__init__(str(error))
        self.sent = sent
        self.error = error


def _check_int32(name: str, value: int) -> None:
    if not 0 <= value <= wire.INT32_MAX:
        raise ValueError(f"{name} must be between 0 and {wire.INT32_MAX}, got {value}")
