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
row, never an error about a "message set".
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from kafka_pyspark.client.framing import BROKER_MAX_REQUEST_BYTES
from kafka_pyspark.messages.layout import HEADER_V1_SIZE
from kafka_pyspark.wire.topics import MAX_TOPIC_BYTES

#: room above max.message.size in a request (several sets of smaller messages per request)
REQUEST_HEADROOM = 1 << 20
#: most raw payload bytes handed to the compressor for one wrapper (a wrapper over
#: max.message.size is split in halves, so this only bounds the work of one attempt)
MAX_COMPRESS_INPUT = 8 << 20
#: bytes a magic-1 message adds to its payload: LENGTH, MAGIC, ATTRIBUTES, CRC32
MESSAGE_OVERHEAD = HEADER_V1_SIZE
#: a MULTIPRODUCE body before its items: REQUEST_TYPE, TOPICPARTITION_COUNT
MULTI_HEADER = 2 + 2
#: one PRODUCE/MULTIPRODUCE item without its topic and messages: TOPIC_LENGTH, PARTITION,
#: MESSAGES_LENGTH (a lone PRODUCE has REQUEST_TYPE instead of the count: the same size)
ITEM_HEADER = 2 + 4 + 4


def request_limit(max_message_size: int) -> int:
    """Most body bytes of one PRODUCE/MULTIPRODUCE the writer sends: room for the largest
    allowed message plus headroom, within 0.7.2's ``max.socket.request.bytes``."""
    wanted = max_message_size + MESSAGE_OVERHEAD + MULTI_HEADER + ITEM_HEADER + MAX_TOPIC_BYTES
    return min(BROKER_MAX_REQUEST_BYTES, wanted + REQUEST_HEADROOM)


def set_limit(request_bytes: int, topic: str) -> int:
    """Most bytes of one encoded message set for ``topic`` that fit in one request."""
    return request_bytes - MULTI_HEADER - ITEM_HEADER - len(topic)


def message_limit(max_message_size: int, request_bytes: int) -> int:
    """Largest uncompressed payload the writer can send: ``max.message.size``, or less when a
    request could not carry it (a topic of any legal length)."""
    room = request_bytes - MULTI_HEADER - ITEM_HEADER - MAX_TOPIC_BYTES - MESSAGE_OVERHEAD
    return min(max_message_size, room)


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
    "cut_runs",
    "message_limit",
    "request_limit",
    "set_limit",
]
