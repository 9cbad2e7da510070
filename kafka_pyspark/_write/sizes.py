"""How large the writer's requests and message sets may be (pure arithmetic, no I/O).

What a 0.7.2 broker limits (docs/dev/PROTOCOL.md "Measured: config defaults"):

* ``max.message.size`` (default 1000000), per *message*: the payload of every message of a
  produced set, a compressed wrapper counting as one message. A set holding one message over
  it is dropped whole, silently. The writer checks it row by row (and per wrapper).
* ``max.socket.request.bytes`` (100 MiB), per *request* body: a larger one closes the
  connection. Not a limit on a message set as such: a set of many messages each under
  ``max.message.size`` is fine as long as its request fits.

The writer keeps its requests far smaller than the broker allows (memory: about one request
per broker is buffered): :func:`request_limit` bytes, about ``max.message.size`` + 1 MiB. Every
message set therefore has to fit in one such request: uncompressed sets are cut by bytes as
well as by ``batch.size`` (:func:`cut_runs`); a compressed wrapper is at most
``max.message.size`` + its header, which always fits. A single message that cannot fit in a
request at all (only possible with ``max.message.size`` near 100 MiB) is an error naming its
row, never an error about a "message set". :class:`SizeLimits` is the one place that decides
that a message or a set is too large, and words the error. Request sizes come from the wire
layer's structs (:func:`kafka_pyspark._wire.produce_item_size`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kafka_pyspark._messages.layout import HEADER_V1_SIZE
from kafka_pyspark._wire import MULTIPRODUCE_HEADER_SIZE, produce_item_size
from kafka_pyspark._wire.topics import MAX_TOPIC_BYTES
from kafka_pyspark.client._framing import BROKER_MAX_REQUEST_BYTES
from kafka_pyspark.errors import MessageTooLargeError

#: room above max.message.size in a request (several sets of smaller messages per request)
REQUEST_HEADROOM = 1 << 20
#: most raw payload bytes handed to the compressor for one wrapper (a wrapper over
#: max.message.size is split in halves, so this only bounds the work of one attempt)
MAX_COMPRESS_INPUT = 8 << 20
#: bytes a magic-1 message adds to its payload: LENGTH, MAGIC, ATTRIBUTES, CRC32
MESSAGE_OVERHEAD = HEADER_V1_SIZE


def request_limit(max_message_size: int) -> int:
    """Most body bytes of one PRODUCE/MULTIPRODUCE the writer sends: room for the largest
    allowed message plus headroom, within 0.7.2's ``max.socket.request.bytes``."""
    largest = produce_item_size(MAX_TOPIC_BYTES, max_message_size + MESSAGE_OVERHEAD)
    return min(BROKER_MAX_REQUEST_BYTES, MULTIPRODUCE_HEADER_SIZE + largest + REQUEST_HEADROOM)


def _set_room(request_bytes: int, topic_bytes: int) -> int:
    """Most bytes of one message set that fit in one request for a topic of ``topic_bytes``."""
    return request_bytes - MULTIPRODUCE_HEADER_SIZE - produce_item_size(topic_bytes, 0)


def set_limit(request_bytes: int, topic: str) -> int:
    """Most bytes of one encoded message set for ``topic`` that fit in one request."""
    return _set_room(request_bytes, len(topic))


def message_limit(max_message_size: int, request_bytes: int, topic: str | None = None) -> int:
    """Largest payload of one message (a compressed wrapper counts as one) the writer can send
    for ``topic``: ``max.message.size``, or less when a request could not carry it. ``topic``
    None: a topic of any legal length (the rows' check, before they are routed)."""
    topic_bytes = MAX_TOPIC_BYTES if topic is None else len(topic)
    return min(max_message_size, _set_room(request_bytes, topic_bytes) - MESSAGE_OVERHEAD)


@dataclass(frozen=True)
class SizeLimits:
    """The one place that decides whether a message or a message set is too large for the
    broker, and says so: one write task's ``max.message.size`` and request size."""

    max_message_size: int
    request_bytes: int

    @classmethod
    def of(cls, max_message_size: int) -> SizeLimits:
        return cls(max_message_size, request_limit(max_message_size))

    def payload_limit(self, topic: str | None = None) -> int:
        """Largest payload of one message for ``topic`` (None: any legal topic)."""
        return message_limit(self.max_message_size, self.request_bytes, topic)

    def message_over(self, payload: int, topic: str | None = None) -> bool:
        """Whether one message (a compressed wrapper counts as one) is too large."""
        return payload > self.payload_limit(topic)

    def fits_any_topic(self, set_bytes: int) -> bool:
        """Whether an encoded message set this large passes both checks above for any topic
        (as one message or as a set): the payload limit for the longest legal topic is the
        smallest, and within the room of one request."""
        return set_bytes - MESSAGE_OVERHEAD <= self.payload_limit()

    def set_over(self, set_bytes: int, topic: str) -> bool:
        """Whether an encoded message set for ``topic`` cannot go in one request."""
        return set_bytes > set_limit(self.request_bytes, topic)

    def too_large(
        self, where: str, message: str, payload: int, topic: str | None = None
    ) -> MessageTooLargeError:
        """The error for a message :meth:`message_over` refuses: ``where`` (the row),
        ``message`` (which message, e.g. its compressed wrapper for a broker-partition)."""
        limit = self.payload_limit(topic)
        why = (
            f"over max.message.size ({limit}); a 0.7 broker would drop the whole message set "
            "silently"
            if limit == self.max_message_size
            else f"over {limit}, the most one request can carry within a 0.7 broker's "
            f"max.socket.request.bytes ({BROKER_MAX_REQUEST_BYTES})"
        )
        return MessageTooLargeError(f"{where}: {message} has a payload of {payload} bytes, {why}")


def cut_runs(
    offsets: npt.NDArray[np.int64],
    lo: int,
    hi: int,
    batch_size: int,
    max_bytes: int,
    per_message: int = 0,
) -> Iterator[tuple[int, int]]:
    """Rows [lo, hi) in runs of at most ``batch_size`` rows and ``max_bytes`` bytes.

    ``offsets`` are the Arrow value offsets (row i is bytes [offsets[i], offsets[i+1])); a run
    of rows [a, b) weighs ``offsets[b] - offsets[a] + per_message * (b - a)``. A single row
    heavier than ``max_bytes`` is a run of its own (the caller reports it).
    """
    pos = lo
    while pos < hi:
        end = min(pos + batch_size, hi)
        if offsets[end] - offsets[pos] + per_message * (end - pos) > max_bytes:
            weights = offsets[pos : end + 1] + per_message * np.arange(end - pos + 1)
            fit = int(np.searchsorted(weights, weights[0] + max_bytes, side="right")) - 1
            end = pos + max(1, fit)
        yield pos, end
        pos = end


__all__ = [
    "MAX_COMPRESS_INPUT",
    "MESSAGE_OVERHEAD",
    "REQUEST_HEADROOM",
    "SizeLimits",
    "cut_runs",
    "message_limit",
    "request_limit",
    "set_limit",
]
