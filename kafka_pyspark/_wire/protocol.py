"""Kafka 0.7 wire layouts (docs/dev/PROTOCOL.md "Requests and responses").

All integers are big-endian. Every request and response is framed by an int32 length that
excludes itself; ``encode_*`` functions return whole frames (length included), ``decode_*``
functions take the frame *body* (the bytes after the length field).

Request header (PRODUCE, FETCH, OFFSETS)::

    int32 REQUEST_LENGTH | int16 REQUEST_TYPE | int16 TOPIC_LENGTH | TOPIC | int32 PARTITION

    PRODUCE 0       header | int32 MESSAGES_LENGTH | MESSAGES
    FETCH 1         header | int64 OFFSET | int32 MAX_SIZE
    OFFSETS 4       header | int64 TIME (-1 latest, -2 earliest) | int32 MAX_NUMBER

Multi-request header (MULTIFETCH, MULTIPRODUCE)::

    int32 REQUEST_LENGTH | int16 REQUEST_TYPE | int16 TOPICPARTITION_COUNT
    MULTIFETCH 2    per fetch:   int16 TOPIC_LENGTH | TOPIC | int32 PARTITION | int64 OFFSET
                                 | int32 MAX_SIZE
    MULTIPRODUCE 3  per produce: int16 TOPIC_LENGTH | TOPIC | int32 PARTITION
                                 | int32 MESSAGES_LENGTH | MESSAGES

Responses (PRODUCE and MULTIPRODUCE have none)::

    FETCH       int32 RESPONSE_LENGTH | int16 ERROR_CODE | MESSAGES
    OFFSETS     int32 RESPONSE_LENGTH | int16 ERROR_CODE | int32 NUMBER_OFFSETS | int64 * n
    MULTIFETCH  int32 RESPONSE_LENGTH | int16 ERROR_CODE (always 0)
                | per fetch: int32 (2 + n) | int16 ERROR_CODE | n bytes of MESSAGES
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kafka_pyspark.errors import ProtocolError

PRODUCE = 0
FETCH = 1
MULTIFETCH = 2
MULTIPRODUCE = 3
OFFSETS = 4

#: OFFSETS TIME values asking for the log end / the first segment's start; the read options'
#: JSON offsets use the same two numbers (-1 latest, -2 earliest), as Kafka and Spark do.
OFFSETS_LATEST = -1
OFFSETS_EARLIEST = -2

#: the int32 ceiling: 0.7's ids, partitions, sizes and lengths are Java ints on the wire
INT32_MAX = 2**31 - 1
#: the int64 ceiling: byte offsets and times are Java longs
INT64_MAX = 2**63 - 1
#: the most items one MULTIFETCH / MULTIPRODUCE holds (an int16 COUNT)
MAX_MULTI_ITEMS = 2**15 - 1

_INT16 = struct.Struct(">h")  # TOPIC_LENGTH, ERROR_CODE, REQUEST_TYPE, COUNT
_INT32 = struct.Struct(">i")  # lengths, PARTITION, MAX_SIZE, NUMBER_OFFSETS
_LEN_TYPE = struct.Struct(">ih")  # REQUEST_LENGTH, REQUEST_TYPE
_LEN_ERR = struct.Struct(">ih")  # RESPONSE_LENGTH, ERROR_CODE
_OFFSET_SIZE = struct.Struct(">qi")  # FETCH: OFFSET, MAX_SIZE / OFFSETS: TIME, MAX_NUMBER
_PART_OFFSET_SIZE = struct.Struct(">iqi")  # MULTIFETCH item: PARTITION, OFFSET, MAX_SIZE
_PART_LEN = struct.Struct(">ii")  # MULTIPRODUCE item: PARTITION, MESSAGES_LENGTH

_MAX_TOPIC_CHARS = 2**15 - 1  # int16 TOPIC_LENGTH

#: a MULTIPRODUCE body before its items: REQUEST_TYPE, TOPICPARTITION_COUNT
MULTIPRODUCE_HEADER_SIZE = _INT16.size + _INT16.size
#: a PRODUCE/MULTIPRODUCE item besides its topic and messages: TOPIC_LENGTH, PARTITION,
#: MESSAGES_LENGTH (a lone PRODUCE body is REQUEST_TYPE and one item)
PRODUCE_ITEM_OVERHEAD = _INT16.size + _PART_LEN.size
#: answer bodies before their data: FETCH (and MULTIFETCH) ERROR_CODE; OFFSETS ERROR_CODE and
#: NUMBER_OFFSETS; a MULTIFETCH part's length and ERROR_CODE; then one OFFSETS offset (int64)
FETCH_RESPONSE_HEADER_SIZE = _INT16.size
OFFSETS_RESPONSE_HEADER_SIZE = _INT16.size + _INT32.size
MULTIFETCH_PART_HEADER_SIZE = _INT32.size + _INT16.size
OFFSET_SIZE = struct.calcsize(">q")


@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    partition: int
    messages: bytes | memoryview  # a view of the encoder's buffer: copied once, into the frame


@dataclass(frozen=True)
class FetchRequest:
    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(frozen=True)
class OffsetsRequest:
    topic: str
    partition: int
    time: int
    max_number: int


@dataclass(frozen=True)
class MultiFetchRequest:
    fetches: tuple[FetchRequest, ...]


@dataclass(frozen=True)
class MultiProduceRequest:
    produces: tuple[ProduceRequest, ...]


Request = (
    ProduceRequest | FetchRequest | OffsetsRequest | MultiFetchRequest | MultiProduceRequest
)


def produce_item_size(topic_bytes: int, messages_bytes: int) -> int:
    """Bytes of one PRODUCE/MULTIPRODUCE item (the PRODUCE body after its REQUEST_TYPE) for a
    topic of ``topic_bytes`` and a message set of ``messages_bytes``."""
    return PRODUCE_ITEM_OVERHEAD + topic_bytes + messages_bytes


def produce_item_head(topic: str, partition: int, messages_bytes: int) -> bytes:
    """A PRODUCE/MULTIPRODUCE item before its message set of ``messages_bytes``: TOPIC (int16
    length and ASCII bytes), PARTITION, MESSAGES_LENGTH. A partition or length out of the int32
    range, a topic not ASCII or too long: :class:`ProtocolError`."""
    try:
        return _topic_bytes(topic) + _PART_LEN.pack(partition, messages_bytes)
    except struct.error as e:
        raise ProtocolError(
            f"cannot encode a PRODUCE item for topic {topic!r}: partition {partition} or "
            f"message-set length {messages_bytes} is out of the int32 range"
        ) from e


def multiproduce_head(items: int, items_size: int) -> bytes:
    """A MULTIPRODUCE frame before its items (``items`` of them, ``items_size`` bytes in all):
    REQUEST_LENGTH, REQUEST_TYPE, TOPICPARTITION_COUNT."""
    _check_count(items)
    return _LEN_TYPE.pack(MULTIPRODUCE_HEADER_SIZE + items_size, MULTIPRODUCE) + _INT16.pack(
        items
    )


def produce_request_size(req: ProduceRequest | MultiProduceRequest) -> int:
    """Body size (without the 4-byte length) of a PRODUCE/MULTIPRODUCE, without encoding it
    (topics are ASCII: a character is a byte)."""
    if isinstance(req, ProduceRequest):
        return _INT16.size + produce_item_size(len(req.topic), len(req.messages))
    return MULTIPRODUCE_HEADER_SIZE + sum(
        produce_item_size(len(p.topic), len(p.messages)) for p in req.produces
    )


@dataclass(frozen=True)
class FetchResponse:
    error: int
    messages: memoryview | bytes


@dataclass(frozen=True)
class MultiFetchResponse:
    error: int
    parts: tuple[FetchResponse, ...]


@dataclass(frozen=True)
class OffsetsResponse:
    error: int
    offsets: tuple[int, ...]


# --- helpers -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _topic_bytes(topic: str) -> bytes:
    """``int16 length | ASCII bytes`` of ``topic`` (cached: a writer names a few topics in
    thousands of requests)."""
    try:
        raw = topic.encode("ascii")
    except UnicodeEncodeError as e:
        raise ProtocolError(f"topic {topic!r} is not ASCII") from e
    if len(raw) > _MAX_TOPIC_CHARS:
        raise ProtocolError(f"topic is {len(raw)} bytes, over the int16 limit")
    return _INT16.pack(len(raw)) + raw


def _frame(body: bytes) -> bytes:
    return _INT32.pack(len(body)) + body


def frame_length(prefix: bytes | memoryview) -> int:
    """The body length announced by a 4-byte frame prefix (request or response)."""
    if len(prefix) != 4:
        raise ProtocolError(f"frame length prefix must be 4 bytes, got {len(prefix)}")
    n: int = _INT32.unpack(prefix)[0]
    if n < 0:
        raise ProtocolError(f"negative frame length {n}")
    return n


# --- requests: encode (client) -------------------------------------------------------------


def encode_request(req: Request) -> bytes:
    """One whole request frame (length prefix included).

    A field out of its wire range (e.g. a partition >= 2**31) is a :class:`ProtocolError`.
    The frame is built with one join, so message bytes are copied once.
    """
    return b"".join(encode_request_parts(req))


def encode_request_parts(req: Request) -> list[bytes | memoryview]:
    """:func:`encode_request` not joined: the frame's pieces in order (the length prefix
    first; message sets as given), for a scatter-gather send that copies nothing."""
    try:
        parts = _request_parts(req)
        return [_INT32.pack(sum(map(len, parts))), *parts]
    except struct.error as e:
        name = type(req).__name__
        raise ProtocolError(f"cannot encode {name}: a field is out of range: {e}") from e


def _request_parts(req: Request) -> list[bytes | memoryview]:
    """The request body as a list of byte strings (REQUEST_TYPE first), not yet joined."""
    if isinstance(req, FetchRequest | OffsetsRequest):
        rtype, (a, b) = (
            (FETCH, (req.offset, req.max_size))
            if isinstance(req, FetchRequest)
            else (OFFSETS, (req.time, req.max_number))
        )
        head: list[bytes | memoryview] = [
            _INT16.pack(rtype),
            _topic_bytes(req.topic),
            _INT32.pack(req.partition),
            _OFFSET_SIZE.pack(a, b),
        ]
        return head
    if isinstance(req, ProduceRequest):
        return [
            _INT16.pack(PRODUCE),
            produce_item_head(req.topic, req.partition, len(req.messages)),
            req.messages,
        ]
    if isinstance(req, MultiFetchRequest):
        _check_count(len(req.fetches))
        parts: list[bytes | memoryview] = [
            _INT16.pack(MULTIFETCH), _INT16.pack(len(req.fetches))
        ]
        for f in req.fetches:
            parts.append(_topic_bytes(f.topic))
            parts.append(_PART_OFFSET_SIZE.pack(f.partition, f.offset, f.max_size))
        return parts
    if isinstance(req, MultiProduceRequest):
        _check_count(len(req.produces))
        parts = [_INT16.pack(MULTIPRODUCE), _INT16.pack(len(req.produces))]
        for p in req.produces:  # an item's header in one piece, then its message set
            parts.append(produce_item_head(p.topic, p.partition, len(p.messages)))
            parts.append(p.messages)
        return parts
    raise TypeError(f"not a 0.7 request: {req!r}")  # pragma: no cover - type-checked


def _check_count(n: int) -> None:
    if not 0 <= n <= MAX_MULTI_ITEMS:
        raise ProtocolError(f"a multi-request holds at most {MAX_MULTI_ITEMS} items, got {n}")


# --- requests: decode (broker) -------------------------------------------------------------


class _Reader:
    """Bounds-checked cursor over a memoryview; every short read is a ProtocolError."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: memoryview, what: str) -> None:
        self.buf = buf
        self.pos = 0
        self.what = what

    def need(self, n: int, field: str) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError(
                f"{self.what}: truncated at byte {self.pos} reading {field} "
                f"({n} bytes needed, {len(self.buf) - self.pos} left)"
            )

    def unpack(self, st: struct.Struct, field: str) -> tuple[int, ...]:
        self.need(st.size, field)
        vals = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return vals

    def take(self, n: int, field: str) -> memoryview:
        self.need(n, field)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def topic(self) -> str:
        (n,) = self.unpack(_INT16, "TOPIC_LENGTH")
        if n < 0:
            raise ProtocolError(f"{self.what}: negative TOPIC_LENGTH {n}")
        raw = bytes(self.take(n, "TOPIC"))
        if not raw.isascii():
            raise ProtocolError(f"{self.what}: topic is not ASCII: {raw!r}")
        return raw.decode("ascii")

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise ProtocolError(
                f"{self.what}: {len(self.buf) - self.pos} unexpected trailing bytes"
            )


def decode_request(body: bytes | memoryview) -> Request:
    """Decode a request frame body (the bytes after REQUEST_LENGTH).

    Raises :class:`ProtocolError` for an unknown request type or a malformed body. PRODUCE
    message bytes are returned as they are (a memoryview copied to bytes); validating them is
    the message codec's job.
    """
    r = _Reader(memoryview(body), "request")
    (rtype,) = r.unpack(_INT16, "REQUEST_TYPE")
    if rtype in (PRODUCE, FETCH, OFFSETS):
        r.what = {PRODUCE: "PRODUCE", FETCH: "FETCH", OFFSETS: "OFFSETS"}[rtype]
        topic = r.topic()
        (partition,) = r.unpack(_INT32, "PARTITION")
        req: Request
        if rtype == PRODUCE:
            (mlen,) = r.unpack(_INT32, "MESSAGES_LENGTH")
            if mlen < 0:
                raise ProtocolError(f"PRODUCE: negative MESSAGES_LENGTH {mlen}")
            req = ProduceRequest(topic, partition, bytes(r.take(mlen, "MESSAGES")))
        elif rtype == FETCH:
            offset, max_size = r.unpack(_OFFSET_SIZE, "OFFSET/MAX_SIZE")
            req = FetchRequest(topic, partition, offset, max_size)
        else:
            time, max_number = r.unpack(_OFFSET_SIZE, "TIME/MAX_NUMBER")
            req = OffsetsRequest(topic, partition, time, max_number)
        r.done()
        return req
    if rtype in (MULTIFETCH, MULTIPRODUCE):
        r.what = "MULTIFETCH" if rtype == MULTIFETCH else "MULTIPRODUCE"
        (count,) = r.unpack(_INT16, "TOPICPARTITION_COUNT")
        if count < 0:
            raise ProtocolError(f"{r.what}: negative TOPICPARTITION_COUNT {count}")
        if rtype == MULTIFETCH:
            fetches = []
            for _ in range(count):
                topic = r.topic()
                partition, offset, max_size = r.unpack(
                    _PART_OFFSET_SIZE, "PARTITION/OFFSET/MAX_SIZE"
                )
                fetches.append(FetchRequest(topic, partition, offset, max_size))
            r.done()
            return MultiFetchRequest(tuple(fetches))
        produces = []
        for _ in range(count):
            topic = r.topic()
            partition, mlen = r.unpack(_PART_LEN, "PARTITION/MESSAGES_LENGTH")
            if mlen < 0:
                raise ProtocolError(f"MULTIPRODUCE: negative MESSAGES_LENGTH {mlen}")
            produces.append(ProduceRequest(topic, partition, bytes(r.take(mlen, "MESSAGES"))))
        r.done()
        return MultiProduceRequest(tuple(produces))
    raise ProtocolError(f"unknown request type {rtype}")


# --- responses: encode (broker) ------------------------------------------------------------


def encode_fetch_response_header(error: int, message_bytes: int) -> bytes:
    """The 6-byte FETCH response header for ``message_bytes`` of messages that follow.

    Lets a broker send the header and then ``sendfile`` the message bytes.
    """
    try:
        return _LEN_ERR.pack(FETCH_RESPONSE_HEADER_SIZE + message_bytes, error)
    except struct.error as e:
        raise ProtocolError(f"cannot encode FETCH response header: {e}") from e


def encode_fetch_response(error: int, messages: bytes | memoryview = b"") -> bytes:
    return encode_fetch_response_header(error, len(messages)) + bytes(messages)


def encode_offsets_response(error: int, offsets: Sequence[int]) -> bytes:
    n = len(offsets)
    try:
        return (
            _LEN_ERR.pack(OFFSETS_RESPONSE_HEADER_SIZE + OFFSET_SIZE * n, error)
            + _INT32.pack(n)
            + struct.pack(f">{n}q", *offsets)
        )
    except struct.error as e:
        raise ProtocolError(f"cannot encode OFFSETS response: {e}") from e


def encode_multifetch_response(parts: Sequence[tuple[int, bytes | memoryview]]) -> bytes:
    """MULTIFETCH response: top-level error 0, then per fetch ``int32 (2+n) | int16 error | n``."""
    chunks = [_INT16.pack(0)]
    try:
        for error, messages in parts:
            # a part's length counts its ERROR_CODE, as a FETCH answer's does
            chunks.append(_LEN_ERR.pack(FETCH_RESPONSE_HEADER_SIZE + len(messages), error))
            chunks.append(bytes(messages))
        return _frame(b"".join(chunks))
    except struct.error as e:
        raise ProtocolError(f"cannot encode MULTIFETCH response: {e}") from e


# --- responses: decode (client) ------------------------------------------------------------


def decode_fetch_response(body: bytes | memoryview) -> FetchResponse:
    """Decode a FETCH response body; ``messages`` is a zero-copy view of the message bytes."""
    r = _Reader(memoryview(body), "FETCH response")
    (error,) = r.unpack(_INT16, "ERROR_CODE")
    return FetchResponse(error, r.buf[r.pos :])


def decode_offsets_response(body: bytes | memoryview) -> OffsetsResponse:
    r = _Reader(memoryview(body), "OFFSETS response")
    (error,) = r.unpack(_INT16, "ERROR_CODE")
    if r.pos == len(r.buf) and error != 0:
        return OffsetsResponse(error, ())
    (n,) = r.unpack(_INT32, "NUMBER_OFFSETS")
    if n < 0:
        raise ProtocolError(f"OFFSETS response: negative NUMBER_OFFSETS {n}")
    raw = r.take(OFFSET_SIZE * n, "OFFSETS")
    r.done()
    return OffsetsResponse(error, struct.unpack(f">{n}q", raw))


def decode_multifetch_response(
    body: bytes | memoryview, expected: int | None = None
) -> MultiFetchResponse:
    """Decode a MULTIFETCH response body into one :class:`FetchResponse` per fetch, in order.

    ``expected`` (the number of fetches sent) is checked when given.
    """
    r = _Reader(memoryview(body), "MULTIFETCH response")
    (error,) = r.unpack(_INT16, "ERROR_CODE")
    parts = []
    while r.pos < len(r.buf):
        (n,) = r.unpack(_INT32, "part length")
        if n < 2:
            raise ProtocolError(f"MULTIFETCH response: part length {n} < 2")
        (perr,) = r.unpack(_INT16, "part ERROR_CODE")
        parts.append(FetchResponse(perr, r.take(n - 2, "part MESSAGES")))
    if expected is not None and len(parts) != expected and error == 0:
        raise ProtocolError(
            f"MULTIFETCH response: {len(parts)} parts for {expected} fetches"
        )
    return MultiFetchResponse(error, tuple(parts))
