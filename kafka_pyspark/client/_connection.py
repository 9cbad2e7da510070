"""One connection to a Kafka 0.7 broker: the requests, their retry policy, the delivery barrier.

The socket, its deadlines and answer framing are in :mod:`.transport`; request sizes, answer
bounds and descriptions in :mod:`.framing`.

Reads (FETCH, MULTIFETCH, OFFSETS) are idempotent: a connection error or a timeout closes the
socket, waits ``backoff * 2**attempt`` seconds, reconnects and sends again, at most ``retries``
more times. A malformed answer (:class:`ProtocolError`) drops the connection and is never
retried. Writes (PRODUCE, MULTIPRODUCE) have no answer in 0.7; one may be retried on a new
connection only if not a single byte of it reached the socket. Once sent, it is never resent:
the broker may or may not have appended it, and only :meth:`BrokerConnection.barrier` can tell.

Delivery barrier: the broker handles one connection's requests in order (docs/dev/PROTOCOL.md
"Measured: visibility and ordering"), so an OFFSETS answer proves every PRODUCE sent before it on
that connection was appended (a rejected PRODUCE closes the connection, so the answer never
comes). Losing the connection while
produced data is unconfirmed is never hidden: the next :meth:`~BrokerConnection.produce` or
:meth:`~BrokerConnection.barrier` raises :class:`BrokerConnectionError` saying how much data may
not have been appended.

A connection is not meant to be shared between threads; a lock keeps a request and its answer
together if it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from kafka_pyspark import _wire as wire
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.closing import Closing
from kafka_pyspark.client._framing import (
    BROKER_MAX_REQUEST_BYTES,
    check_int32,
    describe,
    describe_multiproduce,
    fetch_answer_bound,
    multifetch_answer_bound,
    offsets_answer_bound,
)
from kafka_pyspark.client._transport import SendFailed, Transport
from kafka_pyspark.errors import (
    BrokerConnectionError,
    KafkaError,
    ProtocolError,
    RequestTooLargeError,
    raise_for_code,
    with_context,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: OFFSETS requests in flight on one connection (:meth:`BrokerConnection.offsets_pipelined`)
OFFSETS_WINDOW = 128


def _offsets_close_hint(req: wire.OffsetsRequest) -> str:
    return (f" (a 0.7 broker does this when partition {req.partition} of topic {req.topic!r} "
            "does not exist on it)")


def _describe_window(requests: Sequence[wire.OffsetsRequest], start: int, stop: int) -> str:
    what = describe(requests[start])
    return what if stop - start == 1 else f"{what} and the {stop - start - 1} OFFSETS after it"


def _whole_frames(frames: Sequence[bytes], start: int, nbytes: int) -> int:
    """How many of ``frames[start:]`` the first ``nbytes`` bytes sent hold whole."""
    k = 0
    while start + k < len(frames) and nbytes >= len(frames[start + k]):
        nbytes -= len(frames[start + k])
        k += 1
    return k


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
        self._transport = Transport(self.host, self.port, self.address,
                                    timeout=self.timeout, buffer_size=self.buffer_size)
        self._lock = threading.RLock()
        self._unconfirmed_bytes = 0
        self._unconfirmed_requests = 0
        # (bytes, requests, reason) of produced data whose connection was lost unconfirmed;
        # raised by the next produce()/barrier(), then forgotten.
        self._lost: tuple[int, int, str] | None = None

    # --- introspection ---------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port``, with the broker id when known (for error messages)."""
        hp = f"{self.host}:{self.port}"
        return hp if self.broker_id is None else f"broker {self.broker_id} at {hp}"

    @property
    def connected(self) -> bool:
        return self._transport.sock is not None

    @property
    def connects(self) -> int:
        """How many sockets this connection has opened (it reconnects after errors)."""
        return self._transport.connects

    @property
    def unconfirmed_bytes(self) -> int:
        """Message-set bytes PRODUCEd on this connection since the last successful barrier."""
        return self._unconfirmed_bytes

    @property
    def unconfirmed_requests(self) -> int:
        """PRODUCE/MULTIPRODUCE requests sent on this connection since the last barrier."""
        return self._unconfirmed_requests

    def __repr__(self) -> str:
        state = "connected" if self.connected else "idle"
        return f"BrokerConnection({self.address}, {state})"

    # --- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the socket. Unconfirmed produced data is forgotten (not reported)."""
        with self._lock:
            self._transport.close()
            self._unconfirmed_bytes = 0
            self._unconfirmed_requests = 0
            self._lost = None

    def _drop(self, reason: str) -> None:
        """Close after an error; unconfirmed produced data becomes 'lost' (reported later)."""
        self._transport.close()
        if self._unconfirmed_requests:
            prev_b, prev_r = (self._lost[0], self._lost[1]) if self._lost else (0, 0)
            self._lost = (
                prev_b + self._unconfirmed_bytes,
                prev_r + self._unconfirmed_requests,
                reason,
            )
            self._unconfirmed_bytes = 0
            self._unconfirmed_requests = 0

    def _ensure_socket(self) -> None:
        """Make sure a live socket is open. An idle socket the broker closed (e.g. it
        restarted) is noticed here, before a request is written into it."""
        if self._transport.sock is not None and not self._transport.idle_ok():
            self._drop(f"{self.address} closed the idle connection")
        self._transport.open()

    # --- request patterns ------------------------------------------------------------------

    def _retry_or_raise(self, err: BrokerConnectionError, attempt: int, note: str) -> None:
        """After failed attempt ``attempt`` (0-based): back off, or raise once out of retries."""
        if attempt >= self.retries:
            if attempt == 0:
                raise err
            raise with_context(err, then=f" (gave up after {attempt + 1} attempts{note})") from err
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
        what = describe(req)
        with self._lock:
            attempt = 0
            while True:
                try:
                    self._ensure_socket()
                    self._transport.send(frame, what)
                    body = self._transport.read_frame(bound, what, close_hint)
                except SendFailed as sf:
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
                        raise with_context(e, self.address) from e
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
        # sent gathered: message sets not copied
        self._write_frame(lambda: wire.encode_request_parts(req), wire.produce_request_size(req),
                          nbytes, describe(req))

    def _write_frame(self, frame: Callable[[], list[bytes | memoryview]], size: int,
                     nbytes: int, what: str) -> None:
        """:meth:`_write_request` of the frame ``frame()`` builds (its body ``size`` bytes,
        ``nbytes`` of them message sets)."""
        if size > BROKER_MAX_REQUEST_BYTES:
            raise RequestTooLargeError(
                f"{what} is {size} bytes, over the broker's "
                f"max.socket.request.bytes ({BROKER_MAX_REQUEST_BYTES}); split it"
            )
        parts = frame()
        with self._lock:
            attempt = 0
            while True:
                self._raise_if_lost(what)
                try:
                    self._ensure_socket()
                    self._transport.send(parts, what)
                except SendFailed as sf:
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
        check_int32("max_size", max_size)
        req = wire.FetchRequest(topic, partition, offset, max_size)
        return self._read_request(req, fetch_answer_bound(max_size), wire.decode_fetch_response)

    def multifetch(self, fetches: Sequence[wire.FetchRequest]) -> list[wire.FetchResponse]:
        """MULTIFETCH: one :class:`wire.FetchResponse` per fetch, in order (count checked)."""
        fetches = tuple(fetches)
        if not fetches:
            return []
        for f in fetches:
            check_int32("max_size", f.max_size)
        bound = multifetch_answer_bound(fetches)
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
        check_int32("max_number", max_number)
        req = wire.OffsetsRequest(topic, partition, time, max_number)
        return self._read_request(req, offsets_answer_bound(max_number),
                                  lambda body: self._offsets_answer(req, body),
                                  _offsets_close_hint(req))

    def _offsets_answer(self, req: wire.OffsetsRequest, body: bytes | memoryview) -> list[int]:
        resp = wire.decode_offsets_response(body)
        raise_for_code(
            resp.error,
            f"OFFSETS topic {req.topic!r} partition {req.partition} time {req.time} "
            f"on {self.address}",
        )
        return list(resp.offsets)

    def offsets_pipelined(
        self, requests: Sequence[wire.OffsetsRequest], answers: list[list[int]] | None = None
    ) -> list[list[int]]:
        """:meth:`offsets` of every request, in order, with up to :data:`OFFSETS_WINDOW` of
        them in flight: a 0.7 broker answers one connection's requests in order, so this
        costs a round trip per window, not per request.

        The answers are appended to ``answers`` (a new list if None) as they come, so on an
        error the caller has those of the requests before the failing one. Everything else is
        as if :meth:`offsets` were called for each request in turn: every answer must come
        within the socket timeout of being awaited; a connection lost before a request's
        answer (a 0.7.2 broker closes it on OFFSETS for a partition it lacks) is retried from
        that request on, ``retries`` times with backoff, then raised naming that request; an
        error code raises the typed :class:`BrokerError` (the connection is dropped when
        answers to later requests are still in flight); a malformed answer drops the
        connection and is never retried.
        """
        out: list[list[int]] = [] if answers is None else answers
        first = len(out)
        for req in requests:
            check_int32("max_number", req.max_number)
        frames = [wire.encode_request(r) for r in requests]
        with self._lock:
            attempt = 0
            while len(out) - first < len(requests):
                done = len(out)
                try:
                    self._ensure_socket()
                    self._offsets_window(requests, frames, out, first)
                except BrokerConnectionError as e:
                    err = e
                except ProtocolError:
                    self._drop("protocol error on pipelined OFFSETS")  # never retried
                    raise
                except KafkaError:
                    raise  # an error code: the connection was dropped if answers were pending
                except BaseException:
                    self._drop("interrupted during pipelined OFFSETS")  # stream position unknown
                    raise
                else:
                    break
                self._drop(str(err))
                if len(out) > done:
                    attempt = 0  # each request has its own retries, as with offsets()
                self._retry_or_raise(err, attempt, "")
                attempt += 1
        return out

    def _offsets_window(self, requests: Sequence[wire.OffsetsRequest], frames: list[bytes],
                        out: list[list[int]], first: int) -> None:
        """Send the requests not answered yet (a window at a time) and read their answers
        into ``out``. A send that fails ends the sending; the answers to the requests sent
        whole before it are still read, then its error is raised."""
        transport = self._transport
        n = len(requests)
        # in flight: at most half the socket buffer of requests, so a send never waits on a
        # broker that waits for its answers to be read
        window = max(1, min(OFFSETS_WINDOW, self.buffer_size // 2 // max(map(len, frames))))
        sent = len(out) - first
        broken: BrokerConnectionError | None = None
        while len(out) - first < n:
            i = len(out) - first
            if broken is None and sent < n and sent - i <= window // 2:
                stop = min(n, i + window)
                try:
                    transport.send(b"".join(frames[sent:stop]), _describe_window(requests, sent,
                                                                                   stop))
                except SendFailed as sf:
                    broken = sf.error
                    sent += _whole_frames(frames, sent, sf.sent)
                else:
                    sent = stop
            if i >= sent:
                assert broken is not None
                raise broken
            req = requests[i]
            body = transport.read_small_frame(offsets_answer_bound(req.max_number),
                                              describe(req), _offsets_close_hint(req))
            try:
                out.append(self._offsets_answer(req, body))
            except ProtocolError as e:
                raise with_context(e, self.address) from e
            except KafkaError:
                if sent > i + 1:  # later answers in flight: the stream cannot be reused
                    self._drop(f"error answer to {describe(req)}")
                raise
        if transport.ahead:
            raise ProtocolError(
                f"{self.address}: {transport.ahead} bytes arrived after the answers to "
                f"{n} pipelined OFFSETS requests, which no request asked for"
            )

    def produce(self, topic: str, partition: int, message_set: bytes | memoryview) -> None:
        """PRODUCE (no answer in 0.7). Never resent once a byte of it was sent."""
        self._write_request(wire.ProduceRequest(topic, partition, message_set),
                            len(message_set))

    def multiproduce(self, items: Sequence[wire.ProduceRequest]) -> None:
        """MULTIPRODUCE (no answer in 0.7). Never resent once a byte of it was sent."""
        items = tuple(items)
        if not items:
            return
        self._write_request(wire.MultiProduceRequest(items), sum(len(p.messages) for p in items))

    def multiproduce_items(self, items: list[bytes | memoryview], size: int,
                           nbytes: int) -> None:
        """MULTIPRODUCE of items laid out already: per item its
        :func:`~kafka_pyspark._wire.produce_item_head`, then its message set (``size`` bytes in
        all, ``nbytes`` of them message sets; gathered, not copied). Never resent once a byte
        of it was sent."""
        count = len(items) // 2
        self._write_frame(lambda: [wire.multiproduce_head(count, size), *items],
                          wire.MULTIPRODUCE_HEADER_SIZE + size, nbytes,
                          describe_multiproduce(count, nbytes))

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
        what = describe(req)
        with self._lock:
            self._raise_if_lost("the delivery barrier")
            if self._unconfirmed_requests == 0:
                return None
            nbytes, nreq = self._unconfirmed_bytes, self._unconfirmed_requests
            try:
                if not self._transport.idle_ok():
                    raise BrokerConnectionError(f"{self.address} closed the connection")
                self._transport.send(wire.encode_request(req), what)
                body = self._transport.read_frame(offsets_answer_bound(1), what, "")
                answer = wire.decode_offsets_response(body)
            except (SendFailed, BrokerConnectionError, ProtocolError) as e:
                cause = e.error if isinstance(e, SendFailed) else e
                self._transport.close()
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
