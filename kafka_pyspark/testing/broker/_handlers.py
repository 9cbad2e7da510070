"""0.7.2 request handling: FETCH, MULTIFETCH, PRODUCE, MULTIPRODUCE, OFFSETS.

A mixin of :class:`~kafka_pyspark.testing.broker._core.EmbeddedBroker`: it answers one decoded
request on one connection, reading and appending through the broker's log store.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from collections.abc import Sequence

from kafka_pyspark import _wire as wire
from kafka_pyspark._messages import decode_message_set
from kafka_pyspark._messages.layout import LENGTH, MIN_LENGTH_BY_MAGIC
from kafka_pyspark._segments.file_names import partition_dir_name
from kafka_pyspark._wire.protocol import OFFSETS_EARLIEST, OFFSETS_LATEST
from kafka_pyspark.errors import (
    KafkaError,
    MessageError,
    OffsetOutOfRangeError,
    TopicNameError,
)
from kafka_pyspark.testing._log import LogStore, PartitionLog, ReadSlice
from kafka_pyspark.testing.broker._broker_errors import CloseConnection
from kafka_pyspark.testing.broker._registration import ZkRegistrar
from kafka_pyspark.testing.broker._server_transport import MSG_MORE, send_slice

log = logging.getLogger(__name__)

# 0.7.2 error codes (kafka.common.ErrorMapping)
NO_ERROR = 0
_UNKNOWN = -1
_OFFSET_OUT_OF_RANGE = 1
_WRONG_PARTITION = 3

_RANDOM_PARTITION = -1  # PRODUCE partition -1: the broker picks one
_MAX_DECOMPRESSED = 256 << 20  # bound on one produced set's inflated size (memory guard)


def _oversized(data: bytes, max_message_size: int) -> tuple[int, int] | None:
    """(offset, payload size) of the first whole message whose payload exceeds the limit.

    0.7.2 ``verifyMessageSize`` (shallow): such a set is dropped with a log line only.
    Malformed headers are left to the full validation that follows.
    """
    if len(data) - 4 - min(MIN_LENGTH_BY_MAGIC.values()) <= max_message_size:
        return None  # no payload in this set can be that large
    pos, end = 0, len(data)
    while pos + 4 <= end:
        (length,) = LENGTH.unpack_from(data, pos)
        if length < 1 or pos + 4 + length > end:
            return None
        header = MIN_LENGTH_BY_MAGIC.get(data[pos + 4])
        if header is None:
            return None
        if length - header > max_message_size:
            return pos, length - header
        pos += 4 + length
    return None


class _Rejected(Exception):
    """Internal: a produced message set 0.7.2 would refuse (connection closed)."""


def _validate(data: bytes) -> tuple[int, int]:
    """(bytes of whole valid messages, message count incl. inner ones) or :class:`_Rejected`.

    0.7.2 ``Log.append``: every message is checked deep (CRC at each level, known magic and
    codec, decompressible); a truncated *trailing* message is dropped silently, but a set
    whose *first* message is truncated is refused (``InvalidMessageSizeException``).
    """
    try:
        result = decode_message_set(
            data, 0, verify_crc=True, max_decompressed_size=_MAX_DECOMPRESSED
        )
    except MessageError as e:
        raise _Rejected(str(e)) from e
    if result.bytes_consumed == 0 and result.partial_size is not None:
        raise _Rejected(
            f"first message is {result.partial_size} bytes but only {len(data)} were sent"
        )
    return result.bytes_consumed, result.batch.num_rows


class RequestHandlers:
    """Answers requests as 0.7.2's ``KafkaRequestHandlers`` (state lives in the broker)."""

    _store: LogStore | None
    _zk: ZkRegistrar | None
    _max_message_size: int
    _new_topic_cond: threading.Condition

    def partitions_for(self, topic: str) -> int:
        raise NotImplementedError

    def _log(self, topic: str, partition: int) -> PartitionLog | None:
        raise NotImplementedError

    def _handle(self, sock: socket.socket, request: wire.Request) -> None:
        if isinstance(request, wire.FetchRequest):
            self._send_fetch(sock, [self._fetch(request)], multi=False)
        elif isinstance(request, wire.MultiFetchRequest):
            self._send_fetch(sock, [self._fetch(f) for f in request.fetches], multi=True)
        elif isinstance(request, wire.ProduceRequest):
            self._produce(request, "PRODUCE")
        elif isinstance(request, wire.MultiProduceRequest):
            for item in request.produces:  # 0.7.2: in order; a bad one ends the request
                self._produce(item, "MULTIPRODUCE")
        elif isinstance(request, wire.OffsetsRequest):
            sock.sendall(wire.encode_offsets_response(NO_ERROR, self._offsets(request)))
        else:  # pragma: no cover - decode_request returns only the types above
            raise CloseConnection(f"unexpected request {request!r}")

    def _check_partition(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.partitions_for(topic)

    def _fetch(self, req: wire.FetchRequest) -> tuple[int, ReadSlice | None]:
        if req.topic == "":
            return _UNKNOWN, None  # 0.7.2: InvalidTopicException -> UnknownCode
        if not self._check_partition(req.topic, req.partition):
            return _WRONG_PARTITION, None
        plog = self._log(req.topic, req.partition)
        if plog is None:
            return NO_ERROR, None  # unknown topic / never-written partition: empty set
        try:
            return NO_ERROR, plog.read(req.offset, req.max_size)
        except OffsetOutOfRangeError:
            return _OFFSET_OUT_OF_RANGE, None

    def _send_fetch(
        self, sock: socket.socket, parts: Sequence[tuple[int, ReadSlice | None]], *, multi: bool
    ) -> None:
        """FETCH: ``int32 (2+n) | int16 error | n bytes``; MULTIFETCH: a top frame around them.

        Headers go with ``sendall`` (flagged MSG_MORE when a body follows), bodies with
        ``sendfile``. A negative length (negative max size) is announced as 0.7.2 did, then
        the connection is dropped.
        """
        sizes = [0 if piece is None else piece.length for _, piece in parts]
        if multi:
            top = wire.encode_fetch_response_header(NO_ERROR, sum(6 + n for n in sizes))
            sock.sendall(top, MSG_MORE if parts else 0)
        for (error, piece), size in zip(parts, sizes, strict=True):
            header = wire.encode_fetch_response_header(error, size)
            sock.sendall(header, MSG_MORE if size > 0 else 0)
            if piece is None or size == 0:
                continue
            if size < 0:
                raise CloseConnection(f"negative fetch size {size}")
            send_slice(sock, piece)

    def _offsets(self, req: wire.OffsetsRequest) -> list[int]:
        if req.topic == "":
            raise CloseConnection("OFFSETS for an empty topic name")
        if not self._check_partition(req.topic, req.partition):
            # 0.7.2: InvalidPartitionException escapes the handler: no answer, connection closed
            raise CloseConnection(
                f"OFFSETS for invalid partition {partition_dir_name(req.topic, req.partition)}"
            )
        plog = self._log(req.topic, req.partition)
        if plog is None:  # 0.7.2 Log.getEmptyOffsets
            return [0] if req.time in (OFFSETS_LATEST, OFFSETS_EARLIEST) else []
        try:
            return plog.offsets_before(req.time, req.max_number)
        except ValueError as e:
            raise CloseConnection(str(e)) from e

    def _produce(self, req: wire.ProduceRequest, kind: str) -> None:
        """Append a produced message set, or raise :class:`CloseConnection` as 0.7.2 does."""
        topic = req.topic
        try:
            wire.validate_topic_name(topic)
        except TopicNameError as e:
            raise CloseConnection(f"{kind} refused: {e}") from e
        count = self.partitions_for(topic)
        partition = random.randrange(count) if req.partition == _RANDOM_PARTITION else req.partition
        if not 0 <= partition < count:
            raise CloseConnection(
                f"{kind} refused: wrong partition {partition} for {topic} "
                f"(valid partitions 0..{count - 1})"
            )
        store = self._store
        if store is None:
            raise CloseConnection("broker is stopping")
        try:
            plog, new_topic = store.get_or_create(topic, partition)
        except (OSError, KafkaError) as e:
            raise CloseConnection(
                f"{kind}: cannot open the log of {partition_dir_name(topic, partition)}: {e}"
            ) from e
        if new_topic:
            with self._new_topic_cond:
                self._new_topic_cond.notify_all()
            if self._zk is not None:
                self._zk.register_topic(topic, count)
        data = bytes(req.messages)  # decoded requests hold bytes: no copy
        too_big = _oversized(data, self._max_message_size)
        if too_big is not None:
            # 0.7.2: MessageSizeTooLargeException is logged, the set dropped, the connection kept
            log.warning(
                "%s on %s dropped: payload size of %d at offset %d of the set is larger "
                "than max.message.size %d",
                kind, partition_dir_name(topic, partition), too_big[1], too_big[0],
                self._max_message_size,
            )
            return
        try:
            valid, messages = _validate(data)
        except _Rejected as e:
            where = partition_dir_name(topic, partition)
            raise CloseConnection(f"{kind} on {where} refused: {e}") from e
        if valid < len(data):
            log.debug("%s on %s: dropped a truncated %d-byte tail", kind,
                      partition_dir_name(topic, partition), len(data) - valid)
        plog.append(memoryview(data)[:valid], messages)


# --- CLI -----------------------------------------------------------------------------------
